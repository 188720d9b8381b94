// Signals a user can cause from outside: a mapped checkpoint or artifact that
// is truncated (or whose disk fails) while in use raises SIGBUS on the next
// read of a lost page; Ctrl-C or a kill interrupts a run that is writing an
// output. These handlers make the first one line naming the file and exit
// code 1 instead of a crash, and remove unfinished temporary outputs
// (runtime/AtomicFile.h) in all cases. Everything else is passed on to the
// handler that was installed before (LLVM's stack dump in q3c, the default
// action otherwise).
#pragma once

#include <cstddef>
#include <string>

namespace q3::runtime {

/// Installs the SIGBUS, SIGINT, SIGTERM and SIGHUP handlers, ignores
/// SIGXFSZ (a write past ulimit -f then fails with EFBIG: one line, exit 1),
/// and makes an uncaught exception one line and exit code 1 (not an abort);
/// `tool` starts the error line ("q3run: error: ..."). Call once, early in main.
void installFatalSignalHandlers(const char *tool);

/// MappedFile registers each mapping, so that a SIGBUS inside it can be
/// reported with the file's name. Returns a handle for unregisterMapping
/// (-1 when the table is full: such a mapping's SIGBUS stays a crash).
int registerMapping(const void *begin, size_t size, const std::string &path);
void unregisterMapping(int handle);

} // namespace q3::runtime
