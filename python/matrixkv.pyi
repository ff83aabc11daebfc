"""Type stubs of the `matrixkv` package (a Rust extension built with pyo3).

Keys and values are bytes: `bytes`, `bytearray` or `memoryview` in, `bytes` out. A `str` is
refused with `TypeError` (encode it first).
"""
from os import PathLike
from typing import (
    Dict,
    Generic,
    Iterable,
    Iterator as _Iterator,
    List,
    Mapping,
    Optional,
    Tuple,
    TypeVar,
    Union,
    final,
)

from typing_extensions import disjoint_base

__all__ = [
    "Keyspace",
    "DB",
    "WriteBatch",
    "Snapshot",
    "Iterator",
    "RawIterator",
    "Error",
    "CorruptionError",
    "StorageError",
    "InvalidArgumentError",
    "ClosedError",
    "ReadOnlyError",
    "__version__",
]

_BytesLike = Union[bytes, bytearray, memoryview]
_T = TypeVar("_T")
_Y = TypeVar("_Y", covariant=True)

__version__: str

class Error(Exception): ...
class CorruptionError(Error): ...
class StorageError(Error): ...
class InvalidArgumentError(Error): ...
class ClosedError(Error): ...
class ReadOnlyError(Error): ...

@final
class Iterator(Generic[_Y]):
    """A Python iterator over a key range (`items()`, `keys()`, `values()`)."""

    def __iter__(self) -> "Iterator[_Y]": ...
    def __next__(self) -> _Y: ...

@final
class RawIterator:
    """A seekable iterator (`iter()`): seek, then next/prev while valid()."""

    def valid(self) -> bool: ...
    def seek_to_first(self) -> None: ...
    def seek_to_last(self) -> None: ...
    def seek(self, target: _BytesLike) -> None: ...
    def seek_for_prev(self, target: _BytesLike) -> None: ...
    def next(self) -> None: ...
    def prev(self) -> None: ...
    def key(self) -> bytes: ...
    def value(self) -> bytes: ...

@final
class WriteBatch:
    def put(self, key: _BytesLike, value: _BytesLike, *, keyspace: Optional["Keyspace"] = None) -> None: ...
    def delete(self, key: _BytesLike, *, keyspace: Optional["Keyspace"] = None) -> None: ...
    def delete_range(self, start: _BytesLike, end: _BytesLike, *, keyspace: Optional["Keyspace"] = None) -> None: ...
    def merge(self, key: _BytesLike, operand: _BytesLike, *, keyspace: Optional["Keyspace"] = None) -> None: ...
    def write(self, *, sync: Optional[bool] = None) -> None: ...
    def discard(self) -> None: ...
    def __len__(self) -> int: ...
    def __enter__(self) -> "WriteBatch": ...
    def __exit__(self, *exc: object) -> bool: ...

@final
class Snapshot:
    def get(
        self, key: _BytesLike, default: Optional[_T] = None, *, keyspace: Optional["Keyspace"] = None
    ) -> Union[bytes, Optional[_T]]: ...
    def multi_get(self, keys: Iterable[_BytesLike], *, keyspace: Optional["Keyspace"] = None) -> List[Optional[bytes]]: ...
    def items(
        self,
        start: Optional[_BytesLike] = None,
        end: Optional[_BytesLike] = None,
        reverse: bool = False,
        *,
        prefix: Optional[_BytesLike] = None,
        include_start: bool = True,
        include_end: bool = False,
        keyspace: Optional["Keyspace"] = None,
    ) -> Iterator[Tuple[bytes, bytes]]: ...
    def keys(
        self,
        start: Optional[_BytesLike] = None,
        end: Optional[_BytesLike] = None,
        reverse: bool = False,
        *,
        prefix: Optional[_BytesLike] = None,
        include_start: bool = True,
        include_end: bool = False,
        keyspace: Optional["Keyspace"] = None,
    ) -> Iterator[bytes]: ...
    def values(
        self,
        start: Optional[_BytesLike] = None,
        end: Optional[_BytesLike] = None,
        reverse: bool = False,
        *,
        prefix: Optional[_BytesLike] = None,
        include_start: bool = True,
        include_end: bool = False,
        keyspace: Optional["Keyspace"] = None,
    ) -> Iterator[bytes]: ...
    def iter(
        self,
        start: Optional[_BytesLike] = None,
        end: Optional[_BytesLike] = None,
        *,
        prefix: Optional[_BytesLike] = None,
        include_start: bool = True,
        include_end: bool = False,
        keyspace: Optional["Keyspace"] = None,
    ) -> RawIterator: ...
    def release(self) -> None: ...
    def __enter__(self) -> "Snapshot": ...
    def __exit__(self, *exc: object) -> bool: ...

@disjoint_base
class Keyspace:
    """A keyspace; `DB` is its default one. Made by `DB.create_keyspace` / `DB.keyspace`."""

    @property
    def name(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def get(self, key: _BytesLike, default: Optional[_T] = None) -> Union[bytes, Optional[_T]]: ...
    def multi_get(self, keys: Iterable[_BytesLike]) -> List[Optional[bytes]]: ...
    def put(self, key: _BytesLike, value: _BytesLike, *, sync: Optional[bool] = None) -> None: ...
    def delete(self, key: _BytesLike, *, sync: Optional[bool] = None) -> None: ...
    def delete_range(self, start: _BytesLike, end: _BytesLike, *, sync: Optional[bool] = None) -> None: ...
    def merge(self, key: _BytesLike, operand: _BytesLike, *, sync: Optional[bool] = None) -> None: ...
    def __getitem__(self, key: _BytesLike, /) -> bytes: ...
    def __setitem__(self, key: _BytesLike, value: _BytesLike, /) -> None: ...
    def __delitem__(self, key: _BytesLike, /) -> None: ...
    def __contains__(self, key: _BytesLike, /) -> bool: ...
    def __iter__(self) -> Iterator[bytes]: ...
    def items(
        self,
        start: Optional[_BytesLike] = None,
        end: Optional[_BytesLike] = None,
        reverse: bool = False,
        *,
        prefix: Optional[_BytesLike] = None,
        include_start: bool = True,
        include_end: bool = False,
    ) -> Iterator[Tuple[bytes, bytes]]: ...
    def keys(
        self,
        start: Optional[_BytesLike] = None,
        end: Optional[_BytesLike] = None,
        reverse: bool = False,
        *,
        prefix: Optional[_BytesLike] = None,
        include_start: bool = True,
        include_end: bool = False,
    ) -> Iterator[bytes]: ...
    def values(
        self,
        start: Optional[_BytesLike] = None,
        end: Optional[_BytesLike] = None,
        reverse: bool = False,
        *,
        prefix: Optional[_BytesLike] = None,
        include_start: bool = True,
        include_end: bool = False,
    ) -> Iterator[bytes]: ...
    def iter(
        self,
        start: Optional[_BytesLike] = None,
        end: Optional[_BytesLike] = None,
        *,
        prefix: Optional[_BytesLike] = None,
        include_start: bool = True,
        include_end: bool = False,
    ) -> RawIterator: ...
    def compact_range(self, start: Optional[_BytesLike] = None, end: Optional[_BytesLike] = None) -> None: ...

@final
class DB(Keyspace):
    def __new__(
        cls,
        path: Union[str, "PathLike[str]"],
        fast_dir: Optional[Union[str, "PathLike[str]"]] = None,
        read_only: bool = False,
        *,
        write_buffer_bytes: int = ...,
        container_bytes: int = ...,
        block_cache_bytes: int = ...,
        merge_operator: str = ...,
        sync: bool = False,
        keyspace_options: Mapping[str, Mapping[str, object]] = ...,
    ) -> "DB": ...
    def write_batch(self, *, sync: Optional[bool] = None) -> WriteBatch: ...
    def snapshot(self) -> Snapshot: ...
    def create_keyspace(
        self,
        name: str,
        *,
        merge_operator: Optional[str] = None,
        ttl: Optional[float] = None,
        min_blob_bytes: Optional[int] = None,
    ) -> Keyspace: ...
    def keyspace(self, name: str) -> Keyspace: ...
    def drop_keyspace(self, name: str) -> None: ...
    def list_keyspaces(self) -> List[str]: ...
    def checkpoint(self, path: Union[str, "PathLike[str]"]) -> None: ...
    def sync_wal(self) -> None: ...
    def flush(self) -> None: ...
    def stats(self) -> Dict[str, int]: ...
    def property(self, name: str) -> str: ...
    def close(self) -> None: ...
    def __enter__(self) -> "DB": ...
    def __exit__(self, *exc: object) -> bool: ...
