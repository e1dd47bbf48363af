"""Real ``*.dist-info`` folders in a temporary site directory, for tests that read a venv with importlib.metadata
(the stamps of venv_stamp, the release seal): put the site first on PYTHONPATH and the reader sees them as installed."""


def dist(site, name, version, requires=(), files=("pkg.py",)):
    """Write ``<name>-<version>.dist-info`` (METADATA with ``Requires-Dist``, a RECORD listing ``files``); returns it."""
    info = site / ("%s-%s.dist-info" % (name.replace("-", "_"), version))
    info.mkdir(parents=True)
    meta = ["Metadata-Version: 2.1", "Name: %s" % name, "Version: %s" % version]
    meta += ["Requires-Dist: %s" % req for req in requires]
    (info / "METADATA").write_text("\n".join(meta) + "\n")
    record = [info.name + "/METADATA,,", info.name + "/RECORD,,"]
    record += ["%s/%s,sha256=%s,0" % (name, rel, version) for rel in files]
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return info


def remove(info):
    """Uninstall: the dist-info folder goes."""
    for child in info.iterdir():
        child.unlink()
    info.rmdir()
