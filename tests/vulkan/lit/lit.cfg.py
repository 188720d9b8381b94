# lit configuration of the Vulkan backend's tests: q3c --target vulkan, q3run
# on lavapipe (Mesa's CPU Vulkan device, pinned by VK_DRIVER_FILES so other
# drivers on a machine do not change what runs), the target passes on IR.
import os
import shutil

import lit.formats

config.name = "q3c-vulkan"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.q3_obj_root, "out")

config.substitutions.append(("%q3-opt", os.path.join(config.q3_tools_dir, "q3-opt", "q3-opt")))
config.substitutions.append(("%q3c", os.path.join(config.q3_tools_dir, "q3c", "q3c")))
config.substitutions.append(("%q3run", os.path.join(config.q3_tools_dir, "q3run", "q3run")))
config.substitutions.append(("%q3_src", config.q3_src_root))
config.substitutions.append(("%lit_inputs", os.path.join(config.q3_src_root, "tests", "lit", "tools", "Inputs")))
python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")
config.substitutions.append(("%python", python))
config.environment["PATH"] = os.pathsep.join([config.llvm_tools_dir, config.environment.get("PATH", "")])
config.environment["VK_DRIVER_FILES"] = config.lavapipe_icd
# Let lavapipe keep its shader cache between runs where it can; harmless if not.
for name in ("HOME", "XDG_CACHE_HOME"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
if os.path.exists(config.lavapipe_icd):
    config.available_features.add("lavapipe")
if shutil.which("spirv-val"):
    config.available_features.add("spirv-val")
