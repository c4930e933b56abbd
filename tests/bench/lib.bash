# tests/bench/lib.bash: what the bench scripts share; sourced, not run
# (tests/bench/run runs every *.sh).

# median A B C...: the middle value, numbers with or without a fraction
# (the lower middle of an even count).
median() { printf '%s\n' "$@" | sort -g | sed -n "$((($# + 1) / 2))p"; }
