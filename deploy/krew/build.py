"""Build the krew archive of `kubectl coldstart` and write its sha256 into coldstart.yaml.

    python3 deploy/krew/build.py [--out dist]

The archive holds the launcher (`kubectl-coldstart`) and the licence note, with fixed owners,
modes and times, so the same sources give the same bytes (and the same sha256) anywhere: the
manifest's digest can be checked by rebuilding (tests/coldstart/test_krew.py does).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import re
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "coldstart.yaml"
FILES = ("kubectl-coldstart", "LICENSE.txt")


def archive() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in FILES:
            data = (HERE / name).read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.uid, info.gid = len(data), 0, 0, 0
            info.mode = 0o755 if name == "kubectl-coldstart" else 0o644
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("dist"))
    args = ap.parse_args()
    data = archive()
    digest = hashlib.sha256(data).hexdigest()
    args.out.mkdir(parents=True, exist_ok=True)
    version = re.search(r"^  version: (v\S+)$", MANIFEST.read_text(), re.M)
    assert version is not None
    path = args.out / f"kubectl-coldstart-{version.group(1)}.tar.gz"
    path.write_bytes(data)
    text = re.sub(r"sha256: [0-9a-f]{64}", f"sha256: {digest}", MANIFEST.read_text())
    MANIFEST.write_text(text)
    print(f"{path}  sha256 {digest}")


if __name__ == "__main__":
    main()
