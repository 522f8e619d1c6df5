"""Transforms: the expression language, operators, chaining, push-down and adaptive push-up (DESIGN §9)."""
