"""split_module: a module cut into parts whose objects link into the same library."""

import ctypes
import re

import llvmlite.ir as ir
import pytest

from dsl.backends import split_module as split
from dsl.backends.codegen_pool import compile_parts
from dsl.backends.link import link_shared
from dsl.backends.optimize import verify_llvm
from dsl.backends.target import host_target, target_machine

I32 = ir.IntType(32)


def _module() -> ir.Module:
    """`int get(void)`, `void set(int)` and `int offset` exported; `get` adds
    up two large internal bodies through an address-taken wrapper (and a
    third directly); the bodies read the internal variable `state` that `set`
    writes, and body0 reads `offset` too."""
    t = host_target()
    module = ir.Module(name="m")
    module.triple, module.data_layout = t.triple, str(target_machine(t, 2).target_data)
    state = ir.GlobalVariable(module, I32, "state")
    state.linkage, state.initializer = "internal", ir.Constant(I32, 0)
    offset = ir.GlobalVariable(module, I32, "offset")
    offset.initializer = ir.Constant(I32, 0)
    helper = _function(module, "helper", [I32], "internal")
    b = ir.IRBuilder(helper.append_basic_block("entry"))
    b.ret(b.add(helper.args[0], ir.Constant(I32, 1)))
    bodies = []
    for k in range(3):
        body = _function(module, f"body{k}", [I32], "internal")
        b = ir.IRBuilder(body.append_basic_block("entry"))
        value = b.add(body.args[0], b.load(state, typ=I32))
        value = b.add(value, b.load(offset, typ=I32)) if k == 0 else value
        for step in range(40):  # a large function: to be moved, not copied
            value = b.xor(b.mul(value, ir.Constant(I32, 3 + step)), ir.Constant(I32, k + step))
        value = b.call(helper, [value])
        extra = b.load(offset, typ=I32) if k == 0 else ir.Constant(I32, 0)
        value = b.add(b.sub(value, value), extra)
        b.ret(value if k == 2 else b.add(value, b.load(state, typ=I32)))
        bodies.append(body)
    wrapper = _function(module, "wrapper", [], "internal")  # small, address-taken: copied
    b = ir.IRBuilder(wrapper.append_basic_block("entry"))
    b.ret(b.add(b.call(bodies[0], [ir.Constant(I32, 0)]), b.call(bodies[1], [ir.Constant(I32, 0)])))
    get = _function(module, "get", [], "")
    b = ir.IRBuilder(get.append_basic_block("entry"))
    slot = b.alloca(wrapper.type)
    b.store(wrapper, slot)
    total = b.call(b.load(slot, typ=wrapper.type), [])
    b.ret(b.add(total, b.call(bodies[2], [ir.Constant(I32, 0)])))
    setter = ir.Function(module, ir.FunctionType(ir.VoidType(), [I32]), "set")
    b = ir.IRBuilder(setter.append_basic_block("entry"))
    b.store(setter.args[0], state)
    b.ret_void()
    return module


def _function(module, name, args, linkage):
    fn = ir.Function(module, ir.FunctionType(I32, args), name)
    fn.linkage = linkage
    return fn


@pytest.fixture
def small_bodies(monkeypatch):
    monkeypatch.setattr(split, "SMALL_FUNCTION_LINES", 20)


def _defined(text):
    return re.findall(r'^define (\w+ )?\S+ @"(\w+)"', text, re.M)


def test_large_internal_functions_each_get_a_part(small_bodies):
    parts = split.split_module(_module())
    assert len(parts) == 3  # part 0 (get, set, and body2 that `get` calls itself), body0, body1
    homes = {name: (linkage.strip(), k) for k, part in enumerate(parts) for linkage, name in _defined(part)}
    assert homes["get"][1] == homes["set"][1] == homes["body2"][1] == 0
    assert homes["body2"][0] == "internal"  # called by an exported function: stays with it
    assert {homes["body0"], homes["body1"]} == {("hidden", 1), ("hidden", 2)}
    for part in parts:
        verify_llvm(part)
        assert part.count('define internal i32 @"helper"') == 1  # small: a copy in each part
        assert "alwaysinline" not in part
    moved = parts[homes["body0"][1]]
    assert 'declare hidden i32 @"body0"' not in moved and 'declare hidden i32 @"body0"' in parts[0]


def test_shared_state_is_defined_once(small_bodies):
    parts = split.split_module(_module())
    definitions = [p for p in parts if re.search(r'^@"state" = hidden global i32 0', p, re.M)]
    declarations = [p for p in parts if '@"state" = external hidden global i32' in p]
    assert len(definitions) == 1 and len(declarations) == len(parts) - 1
    # An exported variable stays exported: defined in part 0, declared without `hidden`.
    assert re.search(r'^@"offset" = global i32 0', parts[0], re.M)
    assert sum('@"offset" = external global i32' in p for p in parts[1:]) == 1  # body0's part


def test_linked_parts_share_one_state(small_bodies, tmp_path):
    module = _module()
    parts = split.split_module(module)
    whole = compile_parts([str(module)], host_target(), 2, jobs=1)
    for name, objects in (("whole", whole), ("parts", compile_parts(parts, host_target(), 2, jobs=2))):
        lib = ctypes.CDLL(str(link_shared(objects, tmp_path / f"{name}.so", host_target())))
        lib.get.restype = ctypes.c_int32
        before = lib.get()
        lib.set(5)  # written in part 0, read by the bodies in the other parts
        assert lib.get() == before + 10, name
        ctypes.c_int32.in_dll(lib, "offset").value = 100  # still exported
        assert lib.get() == before + 110, name


def test_nothing_to_move_is_one_part():
    module = _module()
    parts = split.split_module(module)  # every body is under the default size
    assert parts == [str(module)]
