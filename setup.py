"""Install tvm_tirx: explicit-instruction CUDA tile programming on Apache TVM."""

from setuptools import find_packages, setup

setup(
    name="tvm_tirx",
    version="0.1.0",
    description=(
        "Explicit PTX tile operations (T.cuda.tile.apply) for Apache TVM's TIRx TVMScript"
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    package_dir={"": "python"},
    packages=find_packages("python"),
    # PEP 561: the py.typed marker and the type stubs of `T` (script/*.pyi); and the
    # arch floors (measured with ptxas) that the register family reads.
    package_data={"tvm_tirx": ["py.typed"], "tvm_tirx.tile.families": ["*.json"], "": ["*.pyi"]},
    # apache-tvm-ffi: apache-tvm 0.27.0.post1 asks for >=0.1.14.post0, which installs
    # 0.1.15.post2; with it tvm-ffi's JSON serialization segfaults on IR nodes
    # that carry a dtype (`tvm.ir.save_json(tvm.ir.PrimType("int32"))`), and
    # Schedule.tensorize goes through it (tvm_tirx.schedule.tensor_intrin.tensorize_supported).
    # The whole test suite passes with 0.1.14.post0.
    install_requires=["apache-tvm==0.27.0.post1", "apache-tvm-ffi==0.1.14.post0", "numpy"],
    extras_require={
        # torch is optional; install the CPU build that lies on the machine
        # (`pip install torch==2.13.0`) -- an open-ended requirement would pull
        # a multi-GB CUDA build.
        # setuptools>=70.1 builds wheels without the `wheel` package: test_packaging
        # builds one with the environment's own setuptools, and a fresh venv has
        # 65.5 (Python 3.11's ensurepip) or none (3.12+).
        # pytest-xdist: parallel runs on request (`python -m pytest -n 2`); the suite passes
        # under -n 2 (each worker has its own compile cache in memory, the disk cache is
        # shared and written atomically, tmp_path is per worker).
        # tornado, cloudpickle and psutil: apache-tvm's RPC tracker and server processes need
        # them (tests/python/test_sweep_rpc.py runs a tracker and two servers and stops them
        # through tvm.support.popen_pool, which imports psutil; the `rpc` extra).
        "test": [
            "pytest",
            "hypothesis>=6.100",
            "mypy>=1.10",
            "setuptools>=70.1",
            "pytest-xdist>=3.5",
            "tornado",
            "cloudpickle",
            "psutil",
            # nvdisasm (5 MB, NVIDIA's wheel): SASS-order tests of the GEMM epilogues
            # (tests/python/test_kernels_gemm.py) and `tvm_tirx compile --emit sass`
            "nvidia-cuda-nvdisasm>=13.0; platform_system == 'Linux' and platform_machine == 'x86_64'",
        ],
        # testing.sweep(runner=RPCRunner(...)): the RPC tracker (tornado) and the
        # processes tvm.rpc starts (cloudpickle); psutil lets a server end a timed-out
        # session's child processes
        "rpc": ["tornado", "cloudpickle", "psutil"],
        # the Sphinx site under docs/ (sphinx-build -W -b html docs docs/_build)
        "docs": ["sphinx>=7.2"],
    },
    entry_points={"tvm.backends": ["tvm_tirx = tvm_tirx._plugin:autoload"]},
)
