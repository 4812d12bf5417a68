// Programmatic dependent launch (PDL, compute capability 9.0+): a kernel
// launched with cudaLaunchAttributeProgrammaticStreamSerialization may
// start while the kernel before it on the stream is still running; it must
// call pdl_wait_then_release() (griddepcontrol.wait, gpu/pdl.cuh) before it
// reads what that kernel wrote or writes what that kernel reads. Whatever a
// kernel does before that call overlaps the previous kernel: the decode
// GEMVs stream their first weights there. That is safe only for memory no
// kernel that may still be running writes: weights are written at load
// time, then the stream is synchronized (launch_gemv, launch_qmv and
// launch_qmma state the precondition). Source: CUDA C++ Programming Guide,
// "Programmatic Dependent Launch and Synchronization"; PTX ISA,
// "griddepcontrol". Stream capture keeps the dependency as a programmatic
// edge, so the CUDA graphs get it too. Internal to gpu/.
#pragma once
#include <cuda_runtime.h>

namespace pagoda::cuda {

// Whether launch_pdl sets the attribute on the current device: compute
// capability 9.0 or newer, this library's kernels compiled for a virtual
// architecture of 9.0 or newer (else griddepcontrol is compiled out and
// the kernels could not wait), and the environment does not say PAGODA_PDL=0
// (a benchmark switch: the same kernels with full serialization).
// Cached per device; thread-safe. Throws std::runtime_error (CUDA errors).
bool pdl_enabled();

// Whether this library was built with PAGODA_PDL_EARLY (gpu/pdl.cuh): each
// kernel releases the next one before its wait instead of after.
#if defined(PAGODA_PDL_EARLY) && PAGODA_PDL_EARLY
inline constexpr bool kPdlEarlyRelease = true;
#else
inline constexpr bool kPdlEarlyRelease = false;
#endif

// Whether the int4 linears (qmv, qmma) release early too: a PAGODA_PDL_EARLY
// build with PAGODA_PDL_EARLY_QUANT=OFF keeps them waiting first.
#if defined(PAGODA_PDL_EARLY_QUANT) && !PAGODA_PDL_EARLY_QUANT
inline constexpr bool kPdlEarlyReleaseQuant = false;
#else
inline constexpr bool kPdlEarlyReleaseQuant = kPdlEarlyRelease;
#endif

}  // namespace pagoda::cuda
