def file1():
    return 1
