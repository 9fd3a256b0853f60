"""Launch and follow llama.cpp: the server process, its diagnosis, metrics, benchmarks and live monitoring.

GUI-free like the rest of :mod:`app`; objects report through plain callbacks
that the UI bridges to Qt signals. See ``docs/launch.md``.
"""

from .bench import BenchError, BenchHistory, BenchRun, BenchTest, bench_args, parse_bench_json, run_bench
from .buffers import DeviceBuffers, device_for_buffer_type, logged_buffers
from .client import Completion, Health, LlamaClient, ServerError, ServerLoading, ServerUnreachable
from .diagnose import Diagnosis, diagnose
from .logbuffer import LogBuffer, LogLine
from .metrics import (
    ComparisonRow,
    Metrics,
    RequestTiming,
    Slots,
    Timings,
    generation_progress,
    parse_prometheus,
    parse_slots,
    predicted_vs_actual,
    request_timings,
)
from .monitor import Monitor, MonitorSample, Ring
from .process import LaunchError, RpcUnreachable, ServerProcess, State

__all__ = [
    "BenchError",
    "BenchHistory",
    "BenchRun",
    "BenchTest",
    "bench_args",
    "parse_bench_json",
    "run_bench",
    "DeviceBuffers",
    "device_for_buffer_type",
    "logged_buffers",
    "Completion",
    "Health",
    "LlamaClient",
    "ServerError",
    "ServerLoading",
    "ServerUnreachable",
    "Diagnosis",
    "diagnose",
    "LogBuffer",
    "LogLine",
    "ComparisonRow",
    "Metrics",
    "RequestTiming",
    "Slots",
    "Timings",
    "generation_progress",
    "parse_prometheus",
    "parse_slots",
    "predicted_vs_actual",
    "request_timings",
    "Monitor",
    "MonitorSample",
    "Ring",
    "LaunchError",
    "RpcUnreachable",
    "ServerProcess",
    "State",
]
