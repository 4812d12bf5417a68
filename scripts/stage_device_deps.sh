#!/usr/bin/env bash
# Stages the static PCRE2 and utf8proc libraries (with headers and
# pkg-config files) from this Debian machine into DIR (default
# .devcarry/deps), for a GPU machine whose image lacks them (byte-level BPE
# tokenizers, e.g. Qwen2's, need both). scripts/gpu_run.sh puts DIR on
# PKG_CONFIG_PATH when it exists. Static archives: nothing to find at run time.
#   scripts/stage_device_deps.sh [DIR]      (needs libpcre2-dev libutf8proc-dev)
set -euo pipefail
DIR=$(realpath -m "${1:-.devcarry/deps}")
LIBDIR=/usr/lib/x86_64-linux-gnu
mkdir -p "$DIR/include" "$DIR/lib/pkgconfig"
cp /usr/include/pcre2.h /usr/include/utf8proc.h "$DIR/include/"
cp "$LIBDIR/libpcre2-8.a" "$LIBDIR/libutf8proc.a" "$DIR/lib/"
# prefix is resolved relative to the .pc file, so the folder can move.
cat > "$DIR/lib/pkgconfig/libpcre2-8.pc" <<PC
prefix=\${pcfiledir}/../..
includedir=\${prefix}/include
libdir=\${prefix}/lib
Name: libpcre2-8
Description: PCRE2 8-bit (static, staged by stage_device_deps.sh)
Version: $(pkg-config --modversion libpcre2-8)
Libs: -L\${libdir} -lpcre2-8
Cflags: -I\${includedir} -DPCRE2_STATIC
PC
cat > "$DIR/lib/pkgconfig/libutf8proc.pc" <<PC
prefix=\${pcfiledir}/../..
includedir=\${prefix}/include
libdir=\${prefix}/lib
Name: libutf8proc
Description: utf8proc (static, staged by stage_device_deps.sh)
Version: $(pkg-config --modversion libutf8proc)
Libs: -L\${libdir} -lutf8proc
Cflags: -I\${includedir} -DUTF8PROC_STATIC
PC
du -sh "$DIR"
