#pragma once
// When host memory runs out (a run larger than the machine, or a ulimit / cgroup limit), the
// command says so and exits with the out-of-memory code (4), instead of aborting with an empty
// stderr; summary.json keeps saying the run did not end ("running"). It hooks both paths an
// allocation fails through: C++'s new handler, and mimalloc's error callback (mimalloc's
// operator new aborts on its own and never sees the new handler).
namespace prefetchlab::apps {

void exit_cleanly_when_out_of_host_memory();

}  // namespace prefetchlab::apps
