#!/usr/bin/perl
# bench/agent/alloc_heavy.pl — an allocation-heavy real program for the
# heap-sampling overhead (bench/agent/run.sh): Debian's perl is built with
# glibc's malloc (perl -V:usemymalloc is 'n'), so every string, hash entry
# and array it builds and drops is a malloc/realloc/free. ROUNDS rounds of
# N keys: hash of strings of 0..3000 bytes, array refs, a join, a sort.
#   perl alloc_heavy.pl [N=200000] [ROUNDS=3]
use strict;
use warnings;
my $n = shift // 200000;
my $rounds = shift // 3;
my $total = 0;
for my $round (1 .. $rounds) {
    my (%h, @a);
    for my $i (1 .. $n) {
        my $k = "key$i" . ("x" x ($i % 37));
        $h{$k} = "v" x (($i * 7919) % 3000);
        push @a, [$i, $k] if $i % 3 == 0;
    }
    $total += length $h{$_} for keys %h;
    my $s = join ",", map { $_->[1] } @a;
    $total += length $s;
    $total += scalar(my @sorted = sort { $a->[1] cmp $b->[1] } @a);
}
print "$total\n";
