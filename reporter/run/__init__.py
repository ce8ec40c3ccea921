"""One model, end to end: settings, inputs, the pipeline's stages, progress, the demo; callable as the API's run."""

# `reporter.run` is also the Python API's entry point: calling this package, `reporter.run(model, data, **settings)`,
# is `reporter.api.run` (the package and the function share the name the API is known by).

import sys
import types


class _CallablePackage(types.ModuleType):
    def __call__(self, model, data, **kwargs):
        from reporter.api import run

        return run(model, data, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
