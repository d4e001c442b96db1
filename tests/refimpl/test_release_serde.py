"""refimpl's default serde (`refimpl.serde.MsgpackSerde`) writes the bytes of
the serde of vLLM's releases: a pickled ``(type name, data bytes, part
lengths)`` header, then the data; a pickled value has the type name
"bytes". These facts are checked byte for byte here; `make vllm-check`
exchanges values with the release itself, both ways."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.serde import MsgpackSerde
from refimpl.validate import BadArgumentType

SERDE = MsgpackSerde()
VALUES = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.text(max_size=20), st.binary(max_size=20)
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.frozensets(st.integers(), max_size=3),
        st.dictionaries(st.text(max_size=5), inner, max_size=3),
    ),
    max_leaves=12,
)


def stored(value: Any) -> bytes:
    """The object's bytes as put lays them out: metadata, then the data."""
    data, data_bytes, metadata, md_bytes = SERDE.serialize(value)
    assert isinstance(data, bytes) and len(data) == data_bytes and len(metadata) == md_bytes
    return metadata + data


@given(VALUES)
def test_a_pickled_value_is_laid_out_as_the_release_lays_it_out(value: Any) -> None:
    body = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    header = pickle.dumps(("bytes", len(body), None), protocol=pickle.HIGHEST_PROTOCOL)
    assert stored(value) == header + body
    assert SERDE.deserialize(memoryview(stored(value))) == value


def test_tuples_and_sets_come_back_as_themselves() -> None:
    value = {"t": (1, 2), "s": {3}, "b": b"x"}
    assert SERDE.deserialize(memoryview(stored(value))) == value


@pytest.mark.parametrize(
    "blob, words",
    [
        (b"", "cannot be read back"),
        (b"\x00garbage", "cannot be read back"),
        (pickle.dumps(("bytes", 999, None)) + b"x", "payload of 999 bytes"),
        (pickle.dumps(("Frame", 1, [1])) + b"x", "unknown type name 'Frame'"),
        (pickle.dumps(("bytes", 2, None)) + b"zz", "cannot be read back"),
    ],
)
def test_bytes_that_are_no_such_object_are_value_errors(blob: bytes, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        SERDE.deserialize(memoryview(blob))


@pytest.mark.parametrize("value", [lambda: 1, (x for x in ()), sys.stdout])
def test_what_pickle_refuses_is_a_type_error_and_a_value_error(value: Any) -> None:
    """vLLM's sender catches ValueError from put and sends such an item inline."""
    with pytest.raises(BadArgumentType, match="MsgpackSerde cannot store a"):
        SERDE.serialize(value)


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_plain_values_import_neither_torch_nor_vllm() -> None:
    assert (
        run(
            """
        import sys
        from refimpl.serde import MsgpackSerde
        s = MsgpackSerde()
        d, n, md, mn = s.serialize({"a": [1, 2.5, b"x"]})
        s.deserialize(memoryview(md + d))
        print(sorted(m for m in ("torch", "vllm") if m in sys.modules))
        """
        )
        == "[]"
    )


def test_a_tensor_without_vllm_is_refused_naming_the_encoder() -> None:
    """A value of a type vLLM encodes (a stand-in `torch.Tensor` here) needs
    vLLM's encoder; without vLLM, put is refused in one line."""
    out = run(
        """
        import sys, types
        torch = types.ModuleType("torch")
        class Tensor: pass
        torch.Tensor = Tensor
        sys.modules["torch"] = torch
        sys.modules["vllm"] = None  # vLLM does not import
        from refimpl.serde import MsgpackSerde
        try:
            MsgpackSerde().serialize(Tensor())
        except TypeError as exc:
            print(type(exc).__name__, exc)
        """
    )
    assert out.startswith("BadArgumentType MsgpackSerde encodes tensors") and "serial_utils" in out
