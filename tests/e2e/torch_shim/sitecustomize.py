# Loaded by Python at startup where launchers_test.sh puts this folder on PYTHONPATH for torchrun:
# a stand-in for what the test machine's torch lacks, applied when its torch module is imported.
#
# * Debian unstable's torch 2.14 is built without libuv, yet its rendezvous stores ask for it
#   (TCPStore's use_libuv defaults to True; USE_LIBUV=0 is read only by some paths): without this,
#   torchrun fails before starting any worker. Stores here default to use_libuv=False.
import importlib.abc
import importlib.machinery
import sys


def _stores_without_libuv(distributed):
    store = getattr(distributed, "TCPStore", None)
    if store is None or "use_libuv" not in (store.__init__.__doc__ or ""):
        return  # torch older than libuv stores: nothing asks for it

    class TCPStore(store):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("use_libuv", False)
            super().__init__(*args, **kwargs)

    distributed.TCPStore = TCPStore


_AFTER_IMPORT = {"torch.distributed": _stores_without_libuv}


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _AFTER_IMPORT:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        load = spec.loader.exec_module

        def load_then_patch(module):
            load(module)
            _AFTER_IMPORT[name](module)

        spec.loader.exec_module = load_then_patch
        return spec


sys.meta_path.insert(0, _PatchAfterImport())
