"""What the compiler never does: evaluate user text or cache contents as code,
write outside the files it is told to, or call into a library it has not
checked."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dsl

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("dsl", "grammar", "lowering", "backends")
# `ast.literal_eval` reads literals only; everything here can run code.
FORBIDDEN = re.compile(r"(?<![\w.])(?<!def )(eval|exec|compile)\(|\bpickle\b|\bmarshal\b|\bshelve\b|yaml\.load|os\.system|shell=True")


def test_no_code_evaluation_in_the_package():
    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                code = line.split("#", 1)[0]
                if FORBIDDEN.search(code.replace("literal_eval(", "")) and "re.compile(" not in code:
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_dslc_writes_only_what_it_is_told(tmp_path):
    src = tmp_path / "in" / "k.tk"
    src.parent.mkdir()
    src.write_text("def k(x: f32[N], y: f32[N]):\n    for i in range(N):\n        y[i] = 2.0 * x[i]\n")
    work, tmp, home = (tmp_path / d for d in ("work", "tmp", "home"))
    for d in (work, tmp, home):
        d.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "XDG_CACHE_HOME": str(home / ".cache")}
    env.pop("DSL_CACHE_DIR", None)
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "dsl.cli", str(src), "-o", str(out / "k.so"), "-H", str(out / "k.h"),
                    "--dump-dir", str(out / "dump")], cwd=work, env=env, check=True)
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    dumps = [w for w in written if w.startswith("out/dump/")]
    assert set(written) - set(dumps) == {"in/k.tk", "out/k.so", "out/k.h"}
    assert dumps and not list(work.iterdir()) and not list(tmp.iterdir()) and not list(home.iterdir())


def _fake_library(tmp_path, metadata: str, exports: str = "") -> Path:
    c = tmp_path / "fake.c"
    escaped = metadata.replace("\\", "\\\\").replace('"', '\\"')
    c.write_text(f'const char *__dsl_metadata(void) {{ return "{escaped}"; }}\n{exports}\n')
    so = tmp_path / "fake.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(c)], check=True)
    return so


GOOD = ('{"format":1,"kernels":[{"name":"k","doc":null,"inplace":false,"params":[{"name":"x","kind":"tensor",'
        '"dtype":"f32","dims":["N"],"output":true}],"checks":[]}]}')


@pytest.mark.parametrize("metadata, message", [
    ("not json", "not valid JSON"),
    ('{"format": 99, "kernels": []}', "format 99 is not supported"),
    (GOOD.replace('"f32"', '"f128"'), "malformed"),
    (GOOD.replace('["N"]', '[[1]]'), "malformed"),
    (GOOD.replace('"name":"k"', '"name":"k; rm"'), "malformed"),
    (GOOD, "does not export"),
])
def test_load_checks_metadata_before_any_call(tmp_path, metadata, message):
    with pytest.raises(ValueError, match=message):
        dsl.load(_fake_library(tmp_path, metadata))
