def area(width, height):
    return abs(width * height)


def perimeter(width, height):
    return 2 * (width + height)
