"""`remediator step verify-gpu-memory` end to end: recorded files and a replaying nvidia-smi."""

from __future__ import annotations

from pathlib import Path

from tests.steps.conftest import H200_UUID, SMI, TRACE_COLUMNS, run_step, smi_env
from tests.steps.trace import as_query_line, phases, trace_lines

START = phases("start")
STEADY = (START["generate_16_static_cache"], START["steady_4s"])
BURST = (START["steady_4s"] - 1, START["free_burst"] + 0.5)


def recording(window: tuple[float, float], gpus: int = 1) -> list[str]:
    """One replayed sample per trace line; extra GPUs copy GPU 0's readings."""
    samples = []
    for line in trace_lines(*window):
        first = as_query_line(line, H200_UUID)
        rest = [first.replace("0, GPU-3101", f"{i}, GPU-{i}101", 1) for i in range(1, gpus)]
        samples.append("\n".join([first, *rest]) + "\n")
    return samples


def verify(smi: Path, env: dict[str, str], *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    r = run_step(
        "verify-gpu-memory",
        "--nvidia-smi",
        str(smi),
        "--interval",
        "0",
        "--incident",
        "inc-7",
        *extra,
        env=env,
    )
    assert r.logs and all(line["incident"] == "inc-7" for line in r.logs)
    return r.exit_code, r.verdict


def test_live_sampling_of_the_steady_phase_is_stable(fake_smi: Path, tmp_path: Path) -> None:
    env = smi_env(tmp_path, recording(STEADY))
    code, v = verify(fake_smi, env, "--samples", "10", "--max-spread-mib", "64")
    assert (code, v["outcome"], v["stable"]) == (0, "stable", True)
    assert v["samples"] == 10 and (tmp_path / "calls").read_text() == "10"
    gpu = v["gpus"][0]
    assert gpu["uuid"] == H200_UUID and gpu["min_mib"] == gpu["max_mib"] == 14771
    assert gpu["total_mib"] == 143771


def test_live_sampling_through_the_burst_is_unstable(fake_smi: Path, tmp_path: Path) -> None:
    samples = recording(BURST)
    env = smi_env(tmp_path, samples)
    code, v = verify(fake_smi, env, "--samples", str(len(samples)))
    assert (code, v["outcome"]) == (1, "unstable")
    gpu = v["gpus"][0]
    assert gpu["status"] == "unstable" and gpu["max_mib"] == 22963
    assert [r["code"] for r in gpu["reasons"]] == ["spread"]
    assert v["reasons"][0]["code"] == "unstable_gpus"


def test_a_gpu_missing_from_one_sample_is_unstable(fake_smi: Path, tmp_path: Path) -> None:
    samples = recording(STEADY, gpus=2)[:5]
    samples[2] = samples[2].splitlines()[0] + "\n"  # GPU 1 fell off the bus for a sample
    code, v = verify(fake_smi, smi_env(tmp_path, samples), "--samples", "5")
    assert code == 1
    by_index = {g["index"]: g for g in v["gpus"]}
    assert by_index[0]["status"] == "stable"
    assert by_index[1]["status"] == "unstable"
    assert by_index[1]["reasons"][0] == {"code": "missing", "detail": "GPU 1 in 4 of 5 samples"}


def test_an_unreadable_value_is_an_invalid_reading(fake_smi: Path, tmp_path: Path) -> None:
    samples = recording(STEADY)[:4]
    samples[1] = f"0, {H200_UUID}, [N/A], 143771\n"
    code, v = verify(fake_smi, smi_env(tmp_path, samples), "--samples", "4")
    assert code == 1
    assert v["gpus"][0]["reasons"][0]["code"] == "invalid_reading"
    assert v["gpus"][0]["readings"] == 3


def test_nvidia_smi_failing_is_an_error_not_instability(fake_smi: Path, tmp_path: Path) -> None:
    samples = recording(STEADY)[:2] + [
        "!fail 15 Unable to determine the device handle: Unknown Error"
    ]
    code, v = verify(fake_smi, smi_env(tmp_path, samples), "--samples", "5")
    assert (code, v["outcome"], v["reason"]) == (5, "error", "nvidia_smi_failed")
    assert "exited 15" in v["detail"] and "Unknown Error" in v["detail"]


def test_nvidia_smi_not_installed_is_an_error(tmp_path: Path) -> None:
    code, v = verify(tmp_path / "no-such-nvidia-smi", {}, "--samples", "2")
    assert (code, v["reason"]) == (5, "nvidia_smi_failed")
    assert "not found" in v["detail"]


def test_garbage_output_is_an_error_with_the_line(fake_smi: Path, tmp_path: Path) -> None:
    samples = ["No devices were found\n", "No devices were found\n"]
    code, v = verify(fake_smi, smi_env(tmp_path, samples), "--samples", "2")
    assert (code, v["outcome"]) == (5, "error")
    assert {r["code"] for r in v["reasons"]} == {"input_errors", "no_gpus"}
    assert v["input_errors"][0].startswith("line 1: expected 4 fields")
    assert v["input_errors_total"] == 2


def test_recorded_trace_window_from_file(tmp_path: Path) -> None:
    steady = tmp_path / "steady.csv"
    steady.write_text("\n".join(trace_lines(*STEADY)) + "\n")
    burst = tmp_path / "burst.csv"
    burst.write_text("\n".join(trace_lines(*BURST)) + "\n")
    args = ("verify-gpu-memory", "--columns", TRACE_COLUMNS, "--max-spread-mib", "64")
    ok = run_step(*args, "--from-file", str(steady))
    bad = run_step(*args, "--from-file", str(burst))
    assert (ok.exit_code, ok.verdict["outcome"]) == (0, "stable")
    assert (bad.exit_code, bad.verdict["outcome"]) == (1, "unstable")


def test_from_file_judges_only_the_last_k_samples(tmp_path: Path) -> None:
    lines = trace_lines(START["steady_4s"] - 1, START["free_burst"] + 1.5)
    f = tmp_path / "burst-then-settled.csv"
    f.write_text("\n".join(lines) + "\n")
    args = ("verify-gpu-memory", "--columns", TRACE_COLUMNS, "--from-file", str(f))
    assert run_step(*args).exit_code == 1
    tail = run_step(*args, "--samples", "5")
    assert tail.exit_code == 0 and tail.verdict["gpus"][0]["min_mib"] == 14747


def test_smi_query_csv_format(tmp_path: Path) -> None:
    """The H200 capture: a headerless 7-column line, then `--format=csv` with a
    header and " MiB" units. The header line is understood; line 1 is reported."""
    r = run_step("verify-gpu-memory", "--from-file", str(SMI / "smi_query.csv"))
    assert (r.exit_code, r.verdict["outcome"]) == (5, "error")
    assert r.verdict["input_errors"] == [
        "line 1: expected 4 fields (index,uuid,memory.used,memory.total), got 7: "
        "'0, GPU-310120a7-1c6c-d5d8-776f-27da3337a90e, NVIDIA H200, 0, 143771, 0, 41'"
    ]
    gpu = r.verdict["gpus"][0]
    assert (gpu["uuid"], gpu["last_mib"], gpu["total_mib"]) == (H200_UUID, 0, 143771)
    # the csv-with-units part alone, sampled twice, is a stable idle GPU
    lines = (SMI / "smi_query.csv").read_text().splitlines()[1:]
    f = tmp_path / "query.csv"
    f.write_text("\n".join([*lines, lines[1]]) + "\n")
    ok = run_step("verify-gpu-memory", "--from-file", str(f))
    assert (ok.exit_code, ok.verdict["samples"]) == (0, 2)


def test_bad_usage_is_exit_2_and_calls_nothing(fake_smi: Path, tmp_path: Path) -> None:
    env = smi_env(tmp_path, recording(STEADY))
    for args in (["--samples", "1"], ["--max-spread-mib", "-5"], ["--from-file", "/nope"]):
        r = run_step("verify-gpu-memory", "--nvidia-smi", str(fake_smi), *args, env=env)
        assert r.exit_code == 2 and r.stdout == ""
        assert "Invalid value" in r.stderr
    assert not (tmp_path / "calls").exists()
