// The test programs' way to keep the device busy for a given time: the calling GPU thread spins on
// the global timer (PTX %globaltimer, nanoseconds). On the simulated device a kernel's time comes
// from SIMGPU_KERNELS instead ("name=arg": its first argument), so a kernel that calls this with its
// first argument lasts as long there too.
#pragma once

__device__ static inline void globaltimer_spin(unsigned long long ns)
{
	unsigned long long t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	while (t - t0 < ns);
}
