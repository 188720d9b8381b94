# lit configuration for q3c: .mlir files (IR in -> IR out through q3-opt) and
# .test files (q3c end to end). Tool paths come from lit.site.cfg.py.
import os
import shutil

import lit.formats

config.name = "q3c"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.q3_obj_root, "out")

config.substitutions.append(("%q3-opt", os.path.join(config.q3_tools_dir, "q3-opt", "q3-opt")))
config.substitutions.append(("%q3c", os.path.join(config.q3_tools_dir, "q3c", "q3c")))
config.substitutions.append(("%q3run", os.path.join(config.q3_tools_dir, "q3run", "q3run")))
config.substitutions.append(("%q3_src", config.q3_src_root))
# The independent reference needs numpy, which Debian's interpreter has.
python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")
config.substitutions.append(("%python", python))
# Exit code 1 and one line on stderr, within a timeout (tests/lit/hostile).
config.substitutions.append(("%expect-error", python + " " + os.path.join(
    config.q3_src_root, "tests", "lit", "hostile", "Inputs", "expect_error.py")))
config.environment["PATH"] = os.pathsep.join([config.llvm_tools_dir, config.environment.get("PATH", "")])

# CPU features of this machine that some tests need (REQUIRES: avx512,
# avx512bf16, amx): avx512 is what an x86-64-v4 artifact requires.
try:
    with open("/proc/cpuinfo") as cpuinfo:
        flags = next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), [])
except OSError:
    flags = []
if all(f in flags for f in ("avx512f", "avx512bw", "avx512dq", "avx512vl")):
    config.available_features.add("avx512")
if "avx512_bf16" in flags:
    config.available_features.add("avx512bf16")
if "amx_bf16" in flags and "amx_tile" in flags:
    config.available_features.add("amx")
