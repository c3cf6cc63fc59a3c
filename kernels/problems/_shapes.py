"""What the suite's problem files share (a leading underscore keeps it out of `pkroof problems`)."""


def per_rank(value: int, world_size: int, what: str) -> int:
    """`value` split evenly over the ranks; a shape that does not divide is refused with one line naming it."""
    if value % world_size:
        raise ValueError(f"{what}={value} is not divisible by the world size {world_size}")
    return value // world_size
