def file3():
    return 3.0
