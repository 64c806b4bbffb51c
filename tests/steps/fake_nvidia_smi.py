"""A stand-in nvidia-smi: replays a recording, one sample per invocation.

FAKE_SMI_RECORDING names a file of samples separated by lines "---"; each sample
is printed verbatim. A sample "!fail CODE MESSAGE" makes this call exit CODE with
MESSAGE on stderr, as nvidia-smi does when the driver is in trouble.
FAKE_SMI_STATE names a file holding how many calls were answered so far.
Any arguments other than the verifier's query are refused, as nvidia-smi would.
"""

import os
import sys
from pathlib import Path

EXPECTED = ["--query-gpu=index,uuid,memory.used,memory.total", "--format=csv,noheader,nounits"]


def main() -> int:
    if sys.argv[1:] != EXPECTED:
        print(f"Invalid combination of input arguments: {sys.argv[1:]}", file=sys.stderr)
        return 2
    samples = Path(os.environ["FAKE_SMI_RECORDING"]).read_text().split("---\n")
    state = Path(os.environ["FAKE_SMI_STATE"])
    calls = int(state.read_text()) if state.exists() else 0
    state.write_text(str(calls + 1))
    if calls >= len(samples):
        print("fake nvidia-smi: recording exhausted", file=sys.stderr)
        return 99
    sample = samples[calls]
    if sample.startswith("!fail "):
        _, code, message = sample.split(" ", 2)
        print(message.strip(), file=sys.stderr)
        return int(code)
    sys.stdout.write(sample)
    return 0


if __name__ == "__main__":
    sys.exit(main())
