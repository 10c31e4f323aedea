"""One zstd helper for every level: frames made at each level read back, and each thread gets
(de)compressors of its own (zstandard's objects may not be shared between threads)."""

from __future__ import annotations

import threading

from toolscore.storage.plumbing.zstd_codec import compressor, decompressor
from toolscore.storage.telemetry import compressed, contents


def test_each_level_compresses_with_its_own_settings_and_reads_back() -> None:
    text = " ".join(f"message {i}: {i * 7919 % 1000} items, {i * 31 % 97} left" for i in range(400))
    text = text.encode()
    frames = {level: compressor(level).compress(text) for level in (1, 3, 19)}
    assert compressor(3) is compressor(3) and compressor(1) is not compressor(3)
    assert len({len(f) for f in frames.values()}) > 1  # different levels, different frames
    assert all(decompressor().decompress(f) == text for f in frames.values())


def test_pieces_and_packed_strings_round_trip_through_it() -> None:
    text = "a tool result " * 100
    assert compressed.unpack(compressed.pack(text)[compressed.TAG]) == text
    batch = contents.ContentBatch(0)
    batch.ref(text, 0)
    ((_, _, frame),) = batch.rows()
    assert contents.decompress(frame) == text


def test_each_thread_has_its_own() -> None:
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.extend([compressor(1), decompressor()]))
    thread.start()
    thread.join()
    assert seen[0] is not compressor(1) and seen[1] is not decompressor()
