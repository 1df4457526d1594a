"""(being written)"""


def register():
    pass
