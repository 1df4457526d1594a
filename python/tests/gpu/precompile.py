"""Compiles every module of the GPU suite into an artifact cache.

pattn-compile needs LLVM/MLIR 22, which GPU machines may not have; CUDA
drivers are what a build machine lacks. This script runs where the compiler
is: it plans every case of test_gpu_attention.py, test_gpu_rotary.py and
test_torch_op.py (numpy only) and compiles its module into $PATTN_ARTIFACT_DIR for the given
chip, with the runtime library beside the artifacts. On the GPU machine,
the same PATTN_ARTIFACT_DIR makes pattn.compile load them instead of
compiling.

    PATTN_ARTIFACT_DIR=.gpu-artifacts python3 python/tests/gpu/precompile.py --chip sm_90a

--only-mla compiles the MLA cases alone, for `pytest -k mla` while the MLA
kernel changes; --only-prompts the prompt cases (both backends and the
prefill family), the engine-page cases and test_torch_op.py's, for
`pytest -k "prompt or engine"` and test_torch_op.py while the prefill
kernels and page layouts change.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import pathlib
import sys
import types

HERE = pathlib.Path(__file__).resolve().parent


def _install_torch_stand_in(capability: tuple[int, int]) -> None:
    """Planning a case needs numpy only, but the suite imports torch at its
    top; a stand-in answers the device queries with the target chip."""
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(
        is_available=lambda: True,
        get_device_capability=lambda *args: capability)
    torch.__getattr__ = lambda name: name  # dtype names, annotations
    sys.modules["torch"] = torch


def _compile_prompts(pattn, suite, test_torch_op, args) -> int:
    """The prompt and engine-page cases on both backends, the prompt cases
    on the other prompt kernels (XQA query tiles, the mma.sync prefill),
    and the torch-op cases."""
    engine = [case for case in suite.NAMED if case.config.engine_pages]
    jobs = [(case, backend, {}) for case in suite.PROMPTS + engine
            for backend in (suite.BACKEND, suite.OTHER_BACKEND)]
    if suite.BACKEND != "portable":
        jobs += [(case, suite.BACKEND, {"prompt_kernel": kernel})
                 for case in suite.PROMPTS
                 for kernel in suite.OTHER_PROMPT_KERNELS]
    jobs += [(case, suite.BACKEND, {}) for case in test_torch_op.CASES]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda job: pattn.compile(
            job[0].plan().module.text, chips=[args.chip], backend=job[1],
            **job[2]), jobs))
    print(f"{len(jobs)} prompt and torch-op modules for {args.chip}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chip", default="sm_90a",
                        help="sm_80, sm_86, sm_89, sm_90a, sm_100a or sm_120a")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only-mla", action="store_true",
                        help="only the MLA cases (for `pytest -k mla`)")
    parser.add_argument("--only-prompts", action="store_true",
                        help="only the prompt, engine-page and torch-op "
                        "cases (for `pytest -k 'prompt or engine'` and "
                        "test_torch_op.py)")
    args = parser.parse_args()
    if not os.environ.get("PATTN_ARTIFACT_DIR"):
        parser.error("set PATTN_ARTIFACT_DIR to the cache directory")

    digits = args.chip[3:].rstrip("a")
    _install_torch_stand_in((int(digits[:-1]), int(digits[-1])))
    sys.path[:0] = [str(HERE), str(HERE.parents[1])]
    import pattn
    import test_gpu_attention as suite
    import test_gpu_rotary
    import test_torch_op

    assert suite.CHIP == args.chip, (suite.CHIP, args.chip)
    if args.only_prompts:
        return _compile_prompts(pattn, suite, test_torch_op, args)
    mla_texts = [suite.mla_plan(config).module.text
                 for config in suite.MLA_CASES]
    paged = [] if args.only_mla else \
        suite.GRID + suite.NAMED + suite.PROMPTS + suite.SPECIAL
    texts = [case.plan().module.text for case in paged] + mla_texts
    if not args.only_mla:
        texts += [case.plan().module.text for case in test_torch_op.CASES]
    unique = list(dict.fromkeys(texts))
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        paths = list(pool.map(
            lambda text: pattn.compile(text, chips=[args.chip], backend=suite.BACKEND), unique))
    # test_backends_agree, test_mla_backends_agree: the same programs on the
    # other backend.
    decode_texts = list(dict.fromkeys(
        [case.plan().module.text
         for case in ([] if args.only_mla
                      else suite.GRID + suite.NAMED + suite.PROMPTS)] +
        mla_texts))
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda text: pattn.compile(
            text, chips=[args.chip], backend=suite.OTHER_BACKEND),
            decode_texts))
    # test_other_prompt_kernels_match_reference: the XQA query tiles and
    # the mma.sync prefill.
    if not args.only_mla and suite.BACKEND != "portable":
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(lambda job: pattn.compile(
                job[0].plan().module.text, chips=[args.chip],
                backend=suite.BACKEND, prompt_kernel=job[1]),
                [(case, kernel) for case in suite.PROMPTS
                 for kernel in suite.OTHER_PROMPT_KERNELS]))
    # test_scores_ahead_matches_reference: plans that score a tile ahead.
    if not args.only_mla and suite.BACKEND != "portable":
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(lambda case: pattn.compile(
                case.plan().module.text, chips=[args.chip],
                backend=suite.BACKEND, xqa_scores_ahead=True),
                suite.GRID + suite.NAMED))
    # test_xqa_plan_variants_match_reference: the variants this chip runs.
    if not args.only_mla and suite.BACKEND != "portable":
        variants = [options for name, options in suite.XQA_PLAN_VARIANTS.items()
                    if suite.runs_variant(name, args.chip)]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(lambda job: pattn.compile(
                job[0].plan().module.text, chips=[args.chip],
                backend=suite.BACKEND, **job[1]),
                [(case, options) for case in suite.GRID + suite.NAMED
                 for options in variants]))
    # test_mla_mma_sync_kernel_matches_reference: the mma.sync kernel.
    if args.chip == "sm_90a" and suite.BACKEND != "portable":
        for config in suite.MLA_XQA_CASES:
            pattn.compile(suite.mla_plan(config).module.text,
                          chips=suite.MMA_SYNC_CHIPS, backend=suite.BACKEND)
    # test_mla_fleet_build_runs_this_chips_kernel: a build for three chips.
    if suite.BACKEND != "portable":
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(lambda config: pattn.compile(
                suite.mla_plan(config).module.text, chips=suite.FLEET_CHIPS,
                backend=suite.BACKEND), suite.MLA_FLEET_CASES))
    soft = [suite.mla_plan(suite.MLA_CASES[0]).module.text]
    if not args.only_mla:
        pattn.compile(suite.DISPATCH_CASE.plan().module.text,
                      chips=suite.DISPATCH_CHIPS, backend=suite.BACKEND)
        soft += [suite.NAMED[1].plan().module.text,
                 suite.NAMED[3].plan().module.text]
    for text in soft:
        pattn.compile(text, chips=[args.chip], hardware_conversions=False,
                      backend=suite.BACKEND)
    if not args.only_mla:  # backend-independent: compiled as the tests do
        rotary = list(dict.fromkeys(test_gpu_rotary.module_texts()))
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(lambda text: pattn.compile(
                text, chips=[args.chip]), rotary))
    print(f"{len(unique)} modules for {args.chip} in "
          f"{os.path.dirname(paths[0]) if paths else '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
