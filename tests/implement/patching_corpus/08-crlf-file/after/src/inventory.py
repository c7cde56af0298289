"""Stock levels for a small shop."""

from dataclasses import dataclass


@dataclass
class Item:
    name: str
    price: float
    quantity: int = 0


class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, item):
        self.items[item.name] = item

    def remove(self, name):
        self.items.pop(name, None)

    def total_value(self):
        total = 0.0
        for item in self.items.values():
            total += item.price * item.quantity
        return total

    def names(self):
        return sorted(self.items)

    def count(self):
        return len(self.items)
