import pytest

from audit_core.selection import orders


def test_canonical_order_is_sorted_ids():
    assert orders.canonical(["b_x", "a_y", "c_z"]) == ["a_y", "b_x", "c_z"]


def test_rotation_moves_every_image_one_slot():
    assert orders.rotate(["a", "b", "c"], 1) == ["b", "c", "a"]
    assert orders.rotate(["a", "b", "c"], 3) == ["a", "b", "c"]


def test_default_orders_are_canonical_then_shifts_1_to_k_minus_1():
    shown = orders.presentation_orders(["c", "a", "b", "d"], 3)
    assert shown == [["a", "b", "c", "d"], ["b", "c", "d", "a"], ["c", "d", "a", "b"]]


def test_k_equal_m_puts_every_image_in_every_slot_once():
    shown = orders.presentation_orders(["a", "b", "c"], 3)
    for slot in range(3):
        assert sorted(order[slot] for order in shown) == ["a", "b", "c"]


def test_seeded_shifts_are_distinct_reproducible_and_start_at_zero():
    first = orders.rotation_shifts(4, 3, seed=7, key="p1")
    assert first[0] == 0 and len(set(first)) == 3
    assert first == orders.rotation_shifts(4, 3, seed=7, key="p1")
    draws = {tuple(orders.rotation_shifts(4, 2, seed=7, key=f"p{i}")) for i in range(30)}
    assert len(draws) > 1  # different pools get different rotations


def test_more_orders_than_images_is_refused():
    with pytest.raises(ValueError, match="at least 4 images"):
        orders.rotation_shifts(3, 4)


def test_slot_labels():
    assert orders.slot_labels(4) == ["A", "B", "C", "D"]
    with pytest.raises(ValueError):
        orders.slot_labels(0)
