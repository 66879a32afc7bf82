"""Every element-wise OpInfo of PyTorch's op database is in the element-wise
table (tools/codegen/elementwise.yaml) or excused below with its reason, so
an element-wise function torch adds (or one the table forgets) fails here
instead of being refused by a user's first call.

Which OpInfos are element-wise: those whose aten op torch tags
``torch.Tag.pointwise`` on some overload. The op is the packet
``torch.ops.aten.<aten_name>`` (else the OpInfo's name up to its first dot;
dots become underscores: ``special.bessel_j0`` is
``aten.special_bessel_j0``). Some overload, not the default one: frexp's
default overload carries no tags while ``frexp.Tensor`` does; the price is
that ``max.reduction_with_dim`` is picked by ``max.other`` and excused. An
OpInfo (keyed ``name.variant``) is in the table when its op, its method
variant or an alias's op is a callable the YAML routes (``torch``,
``reflected`` or ``inplace``), or its name is a YAML op's name (op_db wraps
some in a lambda: ``where``).
"""
import pytest
import torch

from sf_testing.elementwise import resolve
from sf_testing.repo import tool

pytestmark = pytest.mark.cpu_only("reads op_db's OpInfos and the YAML; computes nothing")

# OpInfo name -> why it is not an op of the element-wise table.
EXCUSED = {
    "addcmul": "ternary with a `value` number, which the table's ternary kind does not take: "
               "routed by functions/nn.py",
    "addcdiv": "ternary with a `value` number, which the table's ternary kind does not take: "
               "routed by functions/nn.py",
    "clone": "a copy of the components, not math on them: routed by functions/methods",
    "equal": "returns one Python bool, not a tensor: routed by functions/methods/copy.py",
    **{f"{op}.{variant}": f"aten.{op}'s reductions, picked by its element-wise overload "
                          f"{op}.other (the OpInfo {op}.binary): routed by functions/reductions"
       for op in ("max", "min") for variant in ("reduction_with_dim", "reduction_no_dim")},
    "ldexp": "its dtype follows each operand's own type (an integer exponent keeps the "
             "input's, a float one is raised in its own dtype first), not the table's common "
             "promotion: routed by functions/elementwise/by_hand.py",
    "float_power": "each operand is cast to float64 on its own, not promoted with the other "
                   "first (a float16 exponent would round into a bfloat16 base's dtype): "
                   "routed by functions/elementwise/by_hand.py",
    "frexp": "two results (mantissa, exponent), and the table's kinds return one: refused by name",
    "lcm": "torch's kernel traps (SIGFPE: the process ends) on INT64_MIN / -1, which the "
           "table's integer test inputs hold: refused by name",
    **{f"special.{name}": "torch's kernel returns uninitialised memory at x = NaN (a different "
                          "number each call), so no result can equal dense's: refused by name"
       for name in ("chebyshev_polynomial_u", "chebyshev_polynomial_w",
                    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
                    "shifted_chebyshev_polynomial_w", "laguerre_polynomial_l",
                    "legendre_polynomial_p")},
    "native_dropout_backward": "only an aten overload (torch.ops.aten.native_dropout_backward), "
                               "which __torch_function__ never sees: nothing to route",
}


def _pointwise_op(info):
    """The aten op name of an OpInfo torch tags pointwise, or None."""
    name = (info.aten_name or info.name.split(".")[0]).replace(".", "_")  # special_i1
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return None
    tagged = any(torch.Tag.pointwise in getattr(packet, o).tags for o in packet.overloads())
    return name if tagged else None


def _key(info) -> str:
    """An OpInfo's key, as tools/coverage names it: max.reduction_with_dim."""
    return f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name


def _table():
    """(op names, routed callables) of the YAML."""
    ops = tool("codegen/gen_elementwise.py").load_spec()
    routed = {resolve(f) for op in ops for f in op["torch"] + op["reflected"] + op["inplace"]}
    return {op["name"] for op in ops}, routed


def _missing():
    """The pointwise OpInfos neither in the table nor excused, and the
    excused ones that are no pointwise OpInfo any more (or are in the table)."""
    from torch.testing._internal.common_methods_invocations import op_db
    names, routed = _table()
    pointwise, missing, in_table = set(), set(), set()
    for info in op_db:
        if _pointwise_op(info) is None:
            continue
        key = _key(info)
        pointwise.add(key)
        callables = [info.op, info.method_variant] + [a.op for a in info.aliases]
        if info.name.split(".")[0] in names or any(
                c is not None and c in routed for c in callables):
            in_table.add(key)
        elif key not in EXCUSED:
            missing.add(key)
    stale = {n for n in EXCUSED if n not in pointwise or n in in_table}
    return missing, stale


def test_every_pointwise_opinfo_is_in_the_table_or_excused():
    missing, stale = _missing()
    assert not missing, (f"element-wise OpInfos (torch.Tag.pointwise) neither in "
                         f"tools/codegen/elementwise.yaml nor excused here: {sorted(missing)}")
    assert not stale, f"excused but no pointwise OpInfo outside the table: {sorted(stale)}"


def test_picks_by_the_aten_ops_tags():
    """The rule on the cases the docstring names: maximum, frexp and
    special.bessel_j0 are element-wise, conv2d and sum are not."""
    from torch.testing._internal.common_methods_invocations import op_db
    by_key = {_key(i): i for i in op_db}
    assert _pointwise_op(by_key["maximum"]) == "maximum"
    assert _pointwise_op(by_key["frexp"]) == "frexp"
    assert _pointwise_op(by_key["special.bessel_j0"]) == "special_bessel_j0"
    assert _pointwise_op(by_key["nn.functional.conv2d"]) is None
    assert _pointwise_op(by_key["sum"]) is None
