def first():
    value = load()
    return value


def second():
    value = load()
    return value
