"""Reading nvidia-smi CSV: the formats the H200 captures show, and what goes wrong."""

from __future__ import annotations

import math

from remediator.steps.smi_parse import parse_recording
from tests.steps.conftest import SMI, TRACE, TRACE_COLUMNS


def test_the_whole_trace_is_one_gpu_one_sample_per_line() -> None:
    lines = TRACE.read_text().splitlines()
    parsed = parse_recording(TRACE.read_text(), TRACE_COLUMNS.split(","))
    assert parsed.errors == ()
    assert len(parsed.samples) == len(lines)
    assert {r.index for s in parsed.samples for r in s.readings} == {0}
    assert parsed.samples[0].at == lines[0].split(",")[0]
    peak = max(s.readings[0].used_mib for s in parsed.samples)
    assert peak == 28495  # the writer's 27.8 GiB peak


def test_csv_with_header_and_units() -> None:
    text = (SMI / "smi_query.csv").read_text().splitlines()
    parsed = parse_recording("\n".join(text[1:]))
    ((reading,),) = [s.readings for s in parsed.samples]
    assert (reading.index, reading.used_mib, reading.total_mib) == (0, 0, 143771)
    assert reading.uuid == "GPU-310120a7-1c6c-d5d8-776f-27da3337a90e"


def test_h200_queries_capture_mixed_outputs() -> None:
    """h200-queries.txt: the verifier's exact query output among other commands."""
    text = (SMI / "h200-queries.txt").read_text().splitlines()
    query_output = text[text.index(next(t for t in text if "noheader,nounits" in t)) + 1]
    parsed = parse_recording(query_output + "\n" + query_output)
    assert parsed.errors == () and len(parsed.samples) == 2
    assert parsed.samples[0].readings[0].uuid == "GPU-3c5500fe-337d-e367-5ada-b9930f68d93f"


def test_samples_split_when_a_gpu_index_repeats() -> None:
    text = "0, GPU-a, 10, 100\n1, GPU-b, 20, 100\n0, GPU-a, 11, 100\n1, GPU-b, 21, 100\n"
    parsed = parse_recording(text)
    assert [[r.used_mib for r in s.readings] for s in parsed.samples] == [[10, 20], [11, 21]]


def test_unreadable_values_are_nan_and_bad_lines_are_errors() -> None:
    text = "0, GPU-a, [N/A], 100\nx, GPU-a, 1, 100\n0, GPU-a, 5\n\n0, GPU-a, 7, 100\n"
    parsed = parse_recording(text)
    assert math.isnan(parsed.samples[0].readings[0].used_mib)
    assert [(e.line, e.reason) for e in parsed.errors] == [
        (2, "GPU index 'x' is not a number"),
        (3, "expected 4 fields (index,uuid,memory.used,memory.total), got 3"),
    ]
    assert parsed.samples[1].readings[0].used_mib == 7


def test_a_header_without_memory_columns_is_reported() -> None:
    parsed = parse_recording("index, name\n0, NVIDIA H200\n")
    assert parsed.samples == ()
    assert parsed.errors[0].reason == "no memory.used, memory.total column"
