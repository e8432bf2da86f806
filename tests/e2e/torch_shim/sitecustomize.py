# Loaded by Python at startup where launchers_test.sh puts this folder on PYTHONPATH for torchrun:
# two stand-ins for what the test machine lacks, each applied when its torch module is imported.
#
# * Debian unstable's torch 2.14 is built without libuv, yet its rendezvous stores ask for it
#   (TCPStore's use_libuv defaults to True; USE_LIBUV=0 is read only by some paths): without this,
#   torchrun fails before starting any worker. Stores here default to use_libuv=False.
# * torchrun --numa-binding finds each worker's NUMA node from its GPU (torch.accelerator); the
#   test machine has none. GPUBIND_TEST_TORCH_GPU_NUMA="0,0" says there are two GPUs, both on NUMA
#   node 0; torch's own code then chooses the CPUs (node, socket, exclusive, core-complex) and
#   starts each worker under numactl as it would on a GPU node.
import importlib.abc
import importlib.machinery
import os
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


def _gpus_on_numa_nodes(binding):
    nodes = [int(n) for n in os.environ.get("GPUBIND_TEST_TORCH_GPU_NUMA", "").split(",") if n]
    if not nodes:
        return
    binding._get_device_count = lambda: len(nodes)
    binding._get_numa_node_index_for_device_index = lambda *, device_index: nodes[device_index]


_AFTER_IMPORT = {"torch.distributed": _stores_without_libuv, "torch.numa.binding": _gpus_on_numa_nodes}


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
