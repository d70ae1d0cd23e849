"""Regenerate goldfive_core/pb/v1 from proto/goldfive/v1 (``make proto``).

protoc writes imports from the .proto path (``from goldfive.v1 import ...``);
we place the code inside ``goldfive_core.pb.v1`` and rewrite those imports so
the generated package needs no top-level ``goldfive`` module.

``python scripts/gen_proto.py --out DIR`` writes elsewhere (the freshness test
uses it to compare the committed files with a new generation).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
OUT_DIR = ROOT / "goldfive_core" / "pb" / "v1"
_IMPORT = re.compile(r"^from goldfive\.v1 import ", re.MULTILINE)


def generate(out_dir: Path) -> list[Path]:
    """Run protoc on every .proto under proto/goldfive/v1; return the files written."""
    import grpc_tools
    from grpc_tools import protoc  # dev dependency only

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    sources = sorted(str(p.relative_to(PROTO_DIR)) for p in (PROTO_DIR / "goldfive" / "v1").glob("*.proto"))
    with tempfile.TemporaryDirectory() as tmp:
        args = ["protoc", f"-I{PROTO_DIR}", f"-I{well_known}", f"--python_out={tmp}", f"--pyi_out={tmp}", *sources]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        written = []
        out_dir.mkdir(parents=True, exist_ok=True)
        for generated in sorted((Path(tmp) / "goldfive" / "v1").iterdir()):
            text = _IMPORT.sub("from goldfive_core.pb.v1 import ", generated.read_text())
            target = out_dir / generated.name
            target.write_text(text)
            written.append(target)
    init = out_dir / "__init__.py"
    if not init.exists():
        init.write_text('"""Generated protobuf modules (do not edit; run `make proto`)."""\n')
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    ns = parser.parse_args(argv)
    ns.out = ns.out.resolve()  # so a relative path to the package directory also replaces stale files
    if ns.out == OUT_DIR:
        for old in OUT_DIR.glob("*_pb2.py*"):
            old.unlink()
    for path in generate(ns.out):
        print(path.relative_to(ROOT) if ns.out == OUT_DIR else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
