"""python_test: a test of the ps package, NAME.py run under Debian's Python 3 by
run_python_test.sh, with real ps_server daemons (cluster.py) and the package in runfiles."""

def python_test(name, extra_data = []):
    native.sh_test(
        name = name,
        size = "medium",
        srcs = ["run_python_test.sh"],
        args = [name + ".py"],
        data = [
            "cluster.py",
            name + ".py",
            "//python/ps",
            "//server:ps_server",
        ] + extra_data,
        tags = ["no-sandbox"],
    )
