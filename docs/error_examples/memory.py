"""Memory operands: alignment, bounds and the tensors a view reads.

Each ``Case`` is a kernel file that breaks one rule: ``docs/gen_errors.py`` runs it
and puts the message it raises on the error page (see :mod:`error_examples`).
"""

from __future__ import annotations

from . import MEMORY, Case, example


CASES = [
    Case(
        MEMORY,
        r"raw address not in the \.local window",
        "Raw .local access through a generic address",
        example('''
            @T.function
            def kernel(Out: T.Tensor((32,), "float32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                m = T.alloc_buffer((4,), "float32", scope="local")
                t = T.alloc_local((1,), "float32")
                T.ptx["ld.local.f32"](t[0], T.address_of(m[2]))
        '''),
        "lower",
        "A ``.local`` address is an offset in the thread's local window (PTX ISA 6.4.1.1); "
        "``T.address_of`` gives the generic address C++ takes of the array, so the load would "
        "read another location.",
        "Convert it: ``T.call_pure_extern(\"uint64\", \"__cvta_generic_to_local\", m.ptr_to([2]))``, or "
        "write the tile form, which does.",
    ),
    Case(
        MEMORY,
        r"raw address past the tensor's extent",
        "Raw vector load past its tensor",
        example('''
            @T.function
            def kernel(Out: T.Tensor((32,), "int32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                slot = T.alloc_shared((4, 8), "int32", align=16)
                t = T.alloc_local((4,), "int32")
                T.ptx["ld.shared.v4.b32"](t[0], t[1], t[2], t[3], slot.ptr_to([3, 6]))
        '''),
        "lower",
        "A raw ``T.ptx`` call whose operands are an element's address and neighbouring "
        "registers is checked as the tile call it spells (here ``slot`` from element "
        "``(3, 6)``, four values): the fourth value lies two elements past the tensor.",
        "Address an element from which the whole vector lies inside the tensor, or write "
        "the tile form, ``T.cuda.tile.apply(T.ptx[\"ld.shared.v4.b32\"], t, slot.sub[3, 4:8])``.",
    ),
    Case(
        MEMORY,
        r"vector atom not provably aligned",
        "Alignment not provable from the index",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 5), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, 0:4])
        '''),
        "lower",
        "A ``.v4.b32`` access must be 16-byte aligned (PTX ISA 5.4.6). Rows of "
        "five floats start at byte ``20 * tid``, which is not a multiple of 16 for "
        "every thread.",
        "Pad rows to a multiple of the vector size, or use narrower forms.",
    ),
    Case(
        MEMORY,
        r"vector atom not provably aligned",
        "Alignment not promised by the tensor",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])
        '''),
        "lower",
        "Alignment proofs start from the tensor's declared ``align``; without it a "
        "float32 tensor is only known to be 4-byte aligned.",
        "Declare ``T.Tensor(..., align=16)``; the compiled kernel then checks every "
        "argument's pointer against it.",
    ),
    Case(
        MEMORY,
        r"view provably out of the tensor's bounds",
        "View outside its tensor",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid + 1, :])
        '''),
        "lower",
        "Thread 63 would read row 64 of a 64-row tensor. The check evaluates the "
        "view's offset for every thread of the launch that reaches the call (the "
        "enclosing ``if`` guards are taken into account) and names one that is out.",
        "Wrap the index (``(tid + 1) % 64``), guard the call (``if tid < 63:``), pass "
        "``pred=`` to skip the access at run time, or enlarge the tensor.",
    ),
    Case(
        MEMORY,
        r"view not provably within the tensor's bounds",
        "View that may leave its tensor",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16), Idx: T.Tensor((64,), "int32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[Idx[tid], :])
        '''),
        "lower",
        "The row comes from memory, so no proof can place it inside ``A``. A view "
        "that is neither provably inside nor provably outside is accepted only when "
        "the call is predicated or sits under an ``if``: then the check is yours.",
        "Predicate the access (``pred=Idx[tid] < 64``), guard it (``if Idx[tid] < 64:``), or clamp the "
        "index (``T.min(Idx[tid], 63)``).",
    ),
    Case(
        MEMORY,
        r"view not provably within the tensor's bounds: .* is any int32 in \[-2147483648, 2147483647\]: a uint32 value",
        "Index cast to a type it may not fit",
        example('''
            n = T.dynamic("n")

            @T.function
            def kernel(A: T.Tensor((n,), "float32"), Idx: T.Tensor((64,), "uint32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((1,), "float32")
                t = T.cast(Idx[tid], "int32")
                if t < n:
                    T.cuda.tile.apply(T.ptx["ld.global.f32"], r, A.sub[t : t + 1])
        '''),
        "lower",
        "Integers in the proofs are the kernel's: a ``uint32`` of 2**31 or more cast to "
        "``int32`` is negative (an ``int64`` narrowed to ``int32`` keeps only its low 32 "
        "bits), so ``t < n`` holds and ``A[t]`` lies before ``A``. A cast whose source is "
        "not provably within the target type's range is any value of that type.",
        "Check the cast's result (``if 0 <= t and t < n:``), bound the value before the "
        "cast in its own type (``if Idx[tid] < T.cast(n, \"uint32\"):``), or state its "
        "range with ``T.assume``.",
    ),
    Case(
        MEMORY,
        r"index arithmetic may overflow int32",
        "Index arithmetic that may wrap",
        example('''
            @T.function
            def kernel(A: T.Tensor((1 << 32,), "float16", align=4)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1 << 23, block=256))
                r = T.alloc_local((2,), "float16")
                i = T.cuda.block_idx("x") * 256 + T.cuda.thread_idx("x")
                T.cuda.tile.apply(T.ptx["ld.global.v2.b16"], r, A.sub[i * 2 : i * 2 + 2])
        '''),
        "lower",
        "The view's element offset ``i * 2`` is ``int32`` arithmetic: from thread "
        "2**30 on it passes 2**31 - 1 and wraps (undefined in CUDA C++), although the "
        "mathematical offset is inside the 8 GiB tensor. Every ``+``, ``-`` and ``*`` of "
        "an offset must provably stay within its type, unless the access is inside the "
        "tensor whatever value it takes (a stage index ``(k + s) % stages``). A tensor "
        "parameter whose run-time extents are ``int32`` holds at most 2**31 - 1 elements "
        "(the compiled kernel refuses a larger one), so its own offsets need nothing more.",
        "Compute the offset in ``int64`` (``i = T.cast(T.cuda.block_idx(\"x\"), \"int64\") * 256 + ...``), "
        "or bound the sizes: ``T.assume(n <= 2048)`` (checked at run time with "
        "``check_assumptions``) or an ``assert`` before ``T.device_entry`` (checked by the host).",
    ),
    Case(
        MEMORY,
        r"T\.assume needs a boolean condition",
        "An assumption that is not a condition",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 4), "float32", align=16), Idx: T.Tensor((64,), "int32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                T.assume(Idx[tid])
        '''),
        "parse",
        "``T.assume(cond)`` states a fact for the proofs; an ``int32`` value such as "
        "``Idx[tid]`` is not one (its truth would be a C-style \"nonzero\", which says "
        "nothing of the range of ``Idx[tid]``).",
        "State the comparison you mean: ``T.assume(0 <= Idx[tid] and Idx[tid] < 64)`` "
        "(see :doc:`guides/memory`), or ``T.assume(Idx[tid] != 0)``.",
    ),
    Case(
        MEMORY,
        r"memory view without a known tensor",
        "Memory view of an unknown tensor",
        example('''
            @T.function
            def kernel(p: T.handle("float32", "global")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                A = T.decl_buffer((64, 4), "float32", data=p, align=16)
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((4,), "float32")
                T.cuda.tile.apply(T.ptx["ld.global.v4.b32"], r, A.sub[tid, :])
        '''),
        "lower",
        "The bounds and alignment proofs need the tensor a view belongs to: a "
        "kernel parameter or an allocation. A buffer declared over a raw pointer "
        "(``T.decl_buffer(..., data=p)``) has neither, so nothing can be proven.",
        "Declare the parameter as ``A: T.Tensor((64, 4), \"float32\", align=16)``.",
    ),
    Case(
        MEMORY,
        r"dtype view not aligned to its element size",
        "Dtype view that starts inside a wider element",
        example('''
            @T.function
            def kernel(A: T.Tensor((64, 8), "uint8", align=16)):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
                tid = T.cuda.thread_idx("x")
                r = T.alloc_local((1,), "uint32")
                T.cuda.tile.apply(T.ptx["ld.global.b32"], r, A.sub[tid, 2:6].view("uint32"))
        '''),
        "lower",
        "Bytes 2..5 of each row viewed as one ``uint32``: ``.view(dtype)`` expresses the "
        "view's start in ``uint32`` elements and rounds it down, so the load would read "
        "bytes 0..3. A wider dtype view must start at a multiple of its element size "
        "(which the wider access needs anyway); it is never rounded.",
        "Start the view on a wide element (``A.sub[tid, 4:8].view(\"uint32\")``), or load "
        "the bytes with a narrower instruction (``ld.global.v4.b8``).",
    ),
]
