// Names the calling thread (what `top -H`, `ps -L`, gdb and perf show): at most 15 characters,
// longer names are cut. Best effort: a failure changes nothing else.
#pragma once

#include <pthread.h>

#include <string>

namespace paq::io {

inline void name_this_thread(const std::string& name) noexcept
{
    const std::string cut = name.substr(0, 15);
    (void)::pthread_setname_np(::pthread_self(), cut.c_str());
}

}  // namespace paq::io
