// How many CPUs this process may run on: the one count that sizes thread
// pools from the machine (sluice profile, the remote store's curl loops).
#pragma once

namespace sluice {

// Hardware threads in this process's CPU affinity (sched_getaffinity: a
// taskset or cpuset limits it), else the online CPUs; at least 1.
int UsableCores();

}  // namespace sluice
