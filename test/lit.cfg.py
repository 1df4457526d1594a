# -*- Python -*-
# lit configuration for pattn. Tools resolve from the build's bin/ and from
# LLVM 22's bin/ only: /usr/bin holds an older FileCheck.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "PATTN"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.pattn_obj_root, "test")

# FileCheck variables must not leak across CHECK-LABEL blocks.
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"
llvm_config.use_default_substitutions()

# PATTN_CHECK_IR_ROUNDTRIP=1 makes every pattn-opt run also print and
# re-parse its output (--verify-roundtrip).
pattn_opt = "pattn-opt"
if os.environ.get("PATTN_CHECK_IR_ROUNDTRIP"):
    pattn_opt = "pattn-opt --verify-roundtrip"

tools = [
    ToolSubst("pattn-opt", command=os.path.join(config.pattn_tools_dir, "pattn-opt"),
              extra_args=pattn_opt.split()[1:]),
    ToolSubst("pattn-compile",
              command=os.path.join(config.pattn_tools_dir, "pattn-compile")),
    ToolSubst("pattn-capi-test",
              command=os.path.join(config.pattn_tools_dir, "pattn-capi-test")),
]
llvm_config.add_tool_substitutions(tools, [config.pattn_tools_dir])
llvm_config.add_tool_substitutions(["FileCheck", "not", "count", "llvm-nm",
                                    "split-file"],
                                   [config.llvm_tools_dir])
config.substitutions.append(("%pattn_lib_dir",
                             os.path.join(config.pattn_obj_root, "lib")))

# The CUDA toolkit's ptxas assembles the emitted PTX (tests that need it say
# REQUIRES: ptxas).
import shutil
ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
if os.access(ptxas, os.X_OK):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
