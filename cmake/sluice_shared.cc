// The shared runtime library libsluice.so (target sluice_shared, exported as
// Sluice::runtime; cmake/SluiceInstall.cmake) is the whole of the static
// libraries sluice_runtime and sluice_ops. This file only gives the target a
// source: everything in the library comes from those archives.
#include "sluice/sluice.h"
