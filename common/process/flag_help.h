// --help that shows a program's own flags and examples, not the hundred flags of glog and
// gflags that --help lists by default (--helpfull still lists every flag).
#ifndef PS_COMMON_PROCESS_FLAG_HELP_H_
#define PS_COMMON_PROCESS_FLAG_HELP_H_

#include <string>
#include <vector>

namespace ps {

// Whether argv asks for help: --help, -help, -h or --helpshort anywhere.
bool HelpRequested(int argc, char** argv);

// "  --name=DEFAULT\n      description\n" for each flag in `names`, in that order; with no
// names, every flag this project defines (in common/, server/, worker/, ctl/ or bench/): the
// program's main file's first, then by file and name. CHECK-fails on a name no flag has (a
// programming error).
std::string FlagHelp(const std::vector<std::string>& names = {});

// When HelpRequested: prints `usage` (what the program or command does, and examples), then
// "Flags:" and FlagHelp(names), to stdout, and exits 0. Call before
// gflags::ParseCommandLineFlags, which would print its own.
void HandleHelp(int argc, char** argv, const std::string& usage,
                const std::vector<std::string>& names = {});

// What an unknown flag among argv[1..] (before any "--") gets said of it: "unknown flag
// --worker (did you mean \"--workers\"?); PROGRAM --help lists the flags", PROGRAM being
// `program`; "" when every flag is one gflags knows (--noNAME for a bool NAME included; words
// that are not flags, negative numbers and the word after a known non-bool flag without "=",
// its value, are passed over). With --undefok, which lets gflags pass unknown flags, "".
std::string UnknownFlagMessage(int argc, char** argv, const std::string& program);

// gflags::ParseCommandLineFlags (removing the flags from argv), except that an unknown flag is
// refused with UnknownFlagMessage, and gflags' own refusals (a value of the wrong type) exit 2, bad
// input, as every other refusal of a command line does (docs/REFERENCE.md, "Exit codes"); gflags
// alone exits 1. --version and --helpfull still exit 0.
void ParseFlags(int* argc, char*** argv);

}  // namespace ps

#endif  // PS_COMMON_PROCESS_FLAG_HELP_H_
