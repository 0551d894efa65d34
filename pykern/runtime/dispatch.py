"""What ``kernel[grid, block](...)`` and ``kernel.launch(...)`` call: the language's launch syntax,
served by the runtime. The runtime sits below the language, so it registers these with
``pykern.lang.kernel`` (``set_launcher``) when it is imported — ``import pykern`` does.
"""
from __future__ import annotations

import numpy as np

from ..lang import kernel as _kernel
from . import devices
from .array import DeviceArray
from .launch import _unpack_config


class LaunchConfig:
    """``instance[grid, block, ...]``: launches on the device the arguments live on (or the default)."""

    def __init__(self, instance, config):
        self.instance = instance
        self.grid, self.block, self.stream, self.shared = _unpack_config(config, instance.name)

    def __call__(self, *args, **kwargs):
        launch_instance(self.instance, self.grid, self.block, args, self.shared, self.stream, None, kwargs)


def launch_instance(instance, grid, block, args, shared_mem, stream, device, kwargs=None):
    values = (*args, *kwargs.values()) if kwargs else args
    if device is None:
        device = next((a.device for a in values if isinstance(a, DeviceArray)), None)
        if device is None:
            device = devices.device("cpu") if any(isinstance(a, np.ndarray) for a in values) else devices.device()
    fn = device.get_or_load_func(instance.name, instance.module)
    fn.launch(grid, block, *(fn.bind(args, kwargs) if kwargs else args), shared_mem=shared_mem, stream=stream)


_kernel.set_launcher(LaunchConfig, launch_instance)
