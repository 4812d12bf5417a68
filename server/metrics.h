// GET /metrics: the engine's stats snapshot in the Prometheus text
// exposition format (version 0.0.4), with vLLM's metric names under a
// `pagoda:` prefix (vllm/v1/metrics/loggers.py): gauges num_requests_running,
// num_requests_waiting, kv_cache_usage_perc (a fraction, 1 = 100%);
// counters prompt_tokens_total, generation_tokens_total,
// num_preemptions_total, request_success_total{finished_reason};
// histograms (engine-side times, vLLM's buckets) time_to_first_token_seconds,
// inter_token_latency_seconds (vLLM's current name for the deprecated
// time_per_output_token_seconds), e2e_request_latency_seconds. Pagoda's own:
// kv_cache_blocks_total, kv_cache_used_blocks, engine_steps_total.
// Every sample is labelled model_name="<served name>".
#pragma once
#include <string>

#include "engine/stats.h"

namespace pagoda {

std::string format_prometheus_metrics(const EngineStats& stats, const std::string& model_name);

// The /v1/ws gauges: pagoda:ws_streams (requests started over WebSockets
// and not yet delivered) and pagoda:ws_streams_detached (of those, the ones
// waiting for a resume within the grace period).
std::string format_stream_metrics(size_t streams, size_t detached, const std::string& model_name);

}  // namespace pagoda
