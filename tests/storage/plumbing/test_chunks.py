"""storage.plumbing.chunks: IN lists of bounded size."""

from toolscore.storage.plumbing.chunks import IN_LIST, chunks


def test_splits_into_consecutive_lists_of_at_most_size() -> None:
    assert list(chunks(range(7), 3)) == [[0, 1, 2], [3, 4, 5], [6]]


def test_takes_any_iterable_once_and_yields_nothing_for_none() -> None:
    assert list(chunks(iter("abcd"), 2)) == [["a", "b"], ["c", "d"]]
    assert list(chunks([], 3)) == []


def test_default_size_is_the_in_list_bound() -> None:
    assert [len(c) for c in chunks(range(IN_LIST + 1))] == [IN_LIST, 1]
