#!/bin/sh
# check_layers.sh - the layering of src/, checked over its include graph.
#
#   check_layers.sh [SRC_DIR]           check; exit 1 and print each violation
#   check_layers.sh --arrows [SRC_DIR]  the folder graph as a markdown table
#   check_layers.sh --dot [SRC_DIR]     the folder graph for Graphviz
#
# SRC_DIR defaults to ${srcdir:-.}/src: `make check` passes srcdir, and by
# hand it is the src/ of the tree you stand at the top of.
#
# It reads every #include "..." (and <...>) of src/**/*.c and src/**/*.h,
# resolved the compiler's way: the including file's own folder, then
# include/ (the public headers: ignored), then src/; anything else is a
# system or outside header and ignored. Files included that are not .c/.h
# (params.def) are read too. A file's folder is the first component of its
# path under src/: transport/shm/shm.h is in transport.
#
# The rules (a violation is printed with the include chain behind it):
#   floor      an include stays in its folder or goes to a LOWER floor
#   unplaced   every folder of src/ has a floor in FLOORS below
#   transport  files of NO_TRANSPORT folders never reach a header of
#              TRANSPORT, even through lower floors (overlap -> core ->
#              transport descends all the way, and is still refused)
#   ground     files of GROUND reach nothing outside it
#   cycle      no folders include each other (checked without the floors)

# ---- the data: edit here ----------------------------------------------
# folder      floor
FLOORS='
base          0
topology      1
transport     1
device        1
bootstrap     1
algorithms    2
core          3
overlap       4
api           5
compress      5
moe           5
shim          6
'
TRANSPORT='transport'
NO_TRANSPORT='algorithms topology compress moe overlap'
GROUND='base'
# ------------------------------------------------------------------------

CHECK_LAYERS_FLOORS=$FLOORS
CHECK_LAYERS_TRANSPORT=$TRANSPORT
CHECK_LAYERS_NO_TRANSPORT=$NO_TRANSPORT
CHECK_LAYERS_GROUND=$GROUND
CHECK_LAYERS_SRC="${srcdir:-.}/src"
export CHECK_LAYERS_FLOORS CHECK_LAYERS_TRANSPORT CHECK_LAYERS_NO_TRANSPORT \
	CHECK_LAYERS_GROUND CHECK_LAYERS_SRC

exec perl -w - "$@" <<'PERL_EOF'
use strict;
use warnings;

my $me = 'check_layers';
sub usage {
	my ($rc) = @_;
	my $fh = $rc ? \*STDERR : \*STDOUT;
	print $fh "usage: $me.sh [--arrows | --dot] [SRC_DIR]\n";
	exit $rc;
}

my $mode = 'check';
my $src;
for my $a (@ARGV) {
	if ($a eq '--arrows') { $mode = 'arrows' }
	elsif ($a eq '--dot') { $mode = 'dot' }
	elsif ($a eq '-h' || $a eq '--help') { usage(0) }
	elsif ($a =~ /^-/) { print STDERR "$me: unknown option $a\n"; usage(2) }
	elsif (!defined $src) { $src = $a }
	else { usage(2) }
}
$src = $ENV{CHECK_LAYERS_SRC} unless defined $src;
$src =~ s{(?<=.)/+$}{};
unless (-d $src) {
	print STDERR "$me: no source folder '$src' (run it from the top of the tree, set srcdir, or name src/)\n";
	exit 99;
}
my $incdir = "$src/../include";

# ---- the table ----
my (%floor, %no_transport);
for my $l (split /\n/, $ENV{CHECK_LAYERS_FLOORS}) {
	$l =~ s/#.*//;
	next unless $l =~ /\S/;
	my ($f, $n, $extra) = split ' ', $l;
	if (!defined $n || defined $extra || $n !~ /^\d+$/ || $f =~ m{/}) {
		print STDERR "$me: bad line in FLOORS: '$l' (want: folder floor)\n";
		exit 99;
	}
	if (exists $floor{$f}) { print STDERR "$me: folder $f twice in FLOORS\n"; exit 99 }
	$floor{$f} = $n;
}
my $transport = $ENV{CHECK_LAYERS_TRANSPORT};
my $ground = $ENV{CHECK_LAYERS_GROUND};
$no_transport{$_} = 1 for split ' ', $ENV{CHECK_LAYERS_NO_TRANSPORT};

# ---- the files: *.c and *.h under src/, hidden folders (.deps, .libs) skipped ----
my @files;
sub walk {
	my ($rel) = @_;
	my $dir = $rel eq '' ? $src : "$src/$rel";
	opendir(my $dh, $dir) or do { print STDERR "$me: $dir: $!\n"; exit 99 };
	my @e = sort grep { !/^\./ } readdir $dh;
	closedir $dh;
	for my $e (@e) {
		my $r = $rel eq '' ? $e : "$rel/$e";
		my $p = "$src/$r";
		if (-d $p) { walk($r) unless -l $p }
		elsif ($e =~ /\.[ch]$/ && -f $p) { push @files, $r }
	}
}
walk('');

# a path under src/, or undef where it leaves src/
my $abs_src;
sub norm {
	my ($p) = @_;
	my @out;
	for my $c (split m{/+}, $p) {
		next if $c eq '.' || $c eq '';
		if ($c eq '..') { return undef unless @out; pop @out }
		else { push @out, $c }
	}
	return join '/', @out;
}
sub inside {   # a path written below src/ that climbs out and back in
	my ($p) = @_;
	require Cwd;
	$abs_src = Cwd::abs_path($src) unless defined $abs_src;
	my $a = Cwd::abs_path("$src/$p");
	return undef unless defined $a && index($a, "$abs_src/") == 0;
	return substr($a, length($abs_src) + 1);
}
# where the compiler finds an include: a file under src/, or undef
sub resolve {
	my ($fdir, $quoted, $angled) = @_;
	my $name = defined $quoted ? $quoted : $angled;
	return undef if $name =~ m{^/};
	if (defined $quoted) {
		my $own = $fdir eq '' ? $name : "$fdir/$name";
		if (-f "$src/$own") {
			my $r = norm($own);
			return defined $r ? $r : inside($own);
		}
	}
	return undef if -f "$incdir/$name";   # include/: not a folder of the house
	return undef unless -f "$src/$name";
	my $r = norm($name);
	return defined $r ? $r : inside($name);
}

# ---- the graph ----
my (%inc, %seen);   # $inc{file}{target} = 1
my @queue = @files;
$seen{$_} = 1 for @files;
while (defined(my $f = shift @queue)) {
	open(my $fh, '<', "$src/$f") or do { print STDERR "$me: $src/$f: $!\n"; exit 99 };
	my $text = do { local $/; <$fh> };
	close $fh;
	# comments out (their newlines kept), strings and char constants kept
	$text =~ s{("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|(/\*.*?\*/|//[^\n]*)}
		  {defined $1 ? $1 : "\n" x ($2 =~ tr/\n//)}gse;
	my $fdir = $f =~ m{^(.*)/} ? $1 : '';
	$inc{$f} ||= {};
	while ($text =~ m{^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)}mg) {
		my $t = resolve($fdir, $1, $2);
		next unless defined $t && $t ne $f;
		$inc{$f}{$t} = 1;
		unless ($seen{$t}++) { push @queue, $t }
	}
}
my @nodes = sort keys %inc;
my %out = map { $_ => [sort keys %{$inc{$_}}] } @nodes;
sub folder { return $_[0] =~ m{^([^/]+)/} ? $1 : '' }
my %members;
push @{$members{folder($_)}}, $_ for @nodes;
my @folders = sort grep { $_ ne '' } keys %members;

# folder arrows: $arrow{A}{B} = [file-level includes]
my %arrow;
for my $f (@nodes) {
	my $a = folder($f);
	next if $a eq '';
	for my $t (@{$out{$f}}) {
		my $b = folder($t);
		push @{$arrow{$a}{$b}}, "$f -> $t" if $b ne '' && $b ne $a;
	}
}
sub not_lower {
	my ($a, $b) = @_;
	return exists $floor{$a} && exists $floor{$b} && $floor{$b} >= $floor{$a};
}
# higher floors first, unplaced ones on top, then by name
sub by_floor {
	my $fa = exists $floor{$a} ? $floor{$a} : 1e9;
	my $fb = exists $floor{$b} ? $floor{$b} : 1e9;
	return $fb <=> $fa || $a cmp $b;
}

if ($mode eq 'arrows') {
	print "| floor | from | to (includes) |\n|---|---|---|\n";
	for my $a (sort by_floor @folders) {
		my @to = map {
			my $n = scalar @{$arrow{$a}{$_}};
			"`$_` ($n" . (not_lower($a, $_) ? ", not lower" : '') . ')';
		} sort by_floor keys %{$arrow{$a} || {}};
		printf "| %s | `%s` | %s |\n", exists $floor{$a} ? $floor{$a} : 'none',
			$a, @to ? join(', ', @to) : '-';
	}
	exit 0;
}
if ($mode eq 'dot') {
	print "digraph layers {\n\trankdir=TB;\n\tnode [shape=box];\n";
	my %on;
	push @{$on{exists $floor{$_} ? $floor{$_} : 'none'}}, $_ for @folders;
	# one rank per floor, highest on top, held in order by a column of floor labels
	my @ranks = sort { ($b eq "none") <=> ($a eq "none") || ($a eq "none" ? 0 : $b <=> $a) } keys %on;
	my @labels = map { $_ eq "none" ? "no floor" : "floor $_" } @ranks;
	print "\t{ node [shape=plaintext]; edge [style=invis]; ", join(" -> ", map { "\"$_\"" } @labels), "; }\n" if @labels > 1;
	for my $i (0 .. $#ranks) {
		print "\t{ rank=same; \"$labels[$i]\"; ", join(" ", map { "\"$_\";" } @{$on{$ranks[$i]}}), " }\n";
	}
	for my $a (sort by_floor @folders) {
		for my $b (sort by_floor keys %{$arrow{$a} || {}}) {
			my $n = scalar @{$arrow{$a}{$b}};
			my $bad = not_lower($a, $b) || !exists $floor{$a} || !exists $floor{$b};
			print "\t\"$a\" -> \"$b\" [label=\"$n\"",
				($bad ? ', color=red, fontcolor=red, constraint=false' : ''), "];\n";
		}
	}
	print "}\n";
	exit 0;
}

# ---- the check ----
my @report;
my %count;
sub violation { my ($rule, $msg) = @_; push @report, "$rule: $msg"; $count{$rule}++ }

# the shortest chain from $f to a file for which $want->() holds, through
# files for which $through->() holds (all when undef)
sub chain {
	my ($f, $want, $through) = @_;
	my %prev = ($f => undef);
	my @q = ($f);
	while (defined(my $x = shift @q)) {
		for my $t (@{$out{$x} || []}) {
			next if exists $prev{$t};
			$prev{$t} = $x;
			if ($want->($t)) {
				my @c = ($t);
				unshift @c, $prev{$c[0]} while defined $prev{$c[0]};
				return join ' -> ', @c;
			}
			push @q, $t if !$through || $through->($t);
		}
	}
	return undef;
}

# unplaced
for my $f (@{$members{''} || []}) {
	violation('unplaced', "src/$f is in no folder: move it into one");
}
for my $d (@folders) {
	next if exists $floor{$d};
	my $n = scalar @{$members{$d}};
	violation('unplaced', "folder $d/ has no floor: add it to FLOORS in check_layers.sh"
		. " ($n file" . ($n == 1 ? '' : 's') . ", e.g. $members{$d}[0])");
}
# floor
for my $f (@nodes) {
	my $a = folder($f);
	for my $t (@{$out{$f}}) {
		my $b = folder($t);
		next if $a eq $b || !not_lower($a, $b);
		violation('floor', "$f -> $t ($a is on floor $floor{$a}, $b on floor $floor{$b}: not lower)");
	}
}
# transport
for my $f (@nodes) {
	my $a = folder($f);
	next unless $no_transport{$a} && $a ne $transport;
	my $c = chain($f, sub { folder($_[0]) eq $transport });
	violation('transport', "$f reaches a transport header: $c") if defined $c;
}
# ground
for my $f (@{$members{$ground} || []}) {
	my $c = chain($f, sub { folder($_[0]) ne $ground }, sub { folder($_[0]) eq $ground });
	violation('ground', "$f reaches outside $ground/: $c") if defined $c;
}
# cycle: folders that reach each other, by the arrows alone
my %reach;
for my $a (@folders) {
	my @q = ($a);
	while (defined(my $x = shift @q)) {
		for my $b (keys %{$arrow{$x} || {}}) { push @q, $b unless $reach{$a}{$b}++ }
	}
}
my %done;
for my $a (@folders) {
	next if $done{$a};
	my @knot = grep { $_ eq $a || ($reach{$a}{$_} && $reach{$_}{$a}) } @folders;
	$done{$_} = 1 for @knot;
	next if @knot < 2;
	my %in = map { $_ => 1 } @knot;
	for my $x (@knot) {
		for my $y (@knot) {
			next unless $x lt $y && $arrow{$x}{$y} && $arrow{$y}{$x};
			violation('cycle', "$x and $y include each other: $arrow{$x}{$y}[0]; $arrow{$y}{$x}[0]");
		}
	}
	next if @knot < 3;
	my @lines;
	for my $x (@knot) {
		for my $y (sort grep { $in{$_} } keys %{$arrow{$x} || {}}) {
			my $n = scalar @{$arrow{$x}{$y}};
			push @lines, "    $x -> $y ($n include" . ($n == 1 ? '' : 's') . ", e.g. $arrow{$x}{$y}[0])";
		}
	}
	violation('cycle', join(', ', @knot) . " include each other around cycles; their arrows:\n" . join("\n", @lines));
}

if (!@report) {
	printf "%s: OK (%d files, %d folders, %s)\n", $me, scalar @nodes, scalar @folders, $src;
	exit 0;
}
print "$_\n" for @report;
printf "%s: %d violation%s (%s) in %s\n", $me, scalar @report, @report == 1 ? '' : 's',
	join(', ', map { "$count{$_} $_" } grep { $count{$_} } qw(unplaced floor transport ground cycle)), $src;
exit 1;
PERL_EOF
