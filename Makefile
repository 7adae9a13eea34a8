# profd — the two commands:
#   make run    install what is missing, build, start the example Go target and
#               profd scraping it (embedded storage), print the URL
#   make test   install what is missing, build, run every test; then build
#               with ASan+UBSan and run every test again; then build the
#               libFuzzer targets (clang) and run each a few seconds
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc)

.PHONY: all deps deps-test deps-deb deb build build-asan run test test-plain test-asan test-fuzz fuzz clean format

all: build

deps:
	./scripts/install-deps.sh

deps-test:
	./scripts/install-deps.sh --test

deps-deb:
	./scripts/install-deps.sh --deb

# The Debian package $(BUILD)/profd_<version>_<arch>.deb (dpkg-buildpackage
# from a copy of the tree, then lintian): scripts/build-deb.sh
deb: deps-deb
	./scripts/build-deb.sh $(BUILD)

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DPD_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# only the profd binary: the unit tests are built by `make test`
run: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target profd
	./scripts/run-demo.sh $(BUILD)/profd

# All passes always run (a failure of one does not hide the others); the
# summary lists the failed tests of each, and make fails if any failed.
test: deps-test
	@rm -f $(BUILD)/Testing/Temporary/LastTestsFailed.log $(ASAN_BUILD)/Testing/Temporary/LastTestsFailed.log \
		$(FUZZ_BUILD)/Testing/Temporary/LastTestsFailed.log
	@plain=0; asan=0; fuzz=0; \
	$(MAKE) --no-print-directory test-plain || plain=1; \
	$(MAKE) --no-print-directory test-asan || asan=1; \
	$(MAKE) --no-print-directory test-fuzz || fuzz=1; \
	./scripts/test-summary.sh plain $$plain $(BUILD) asan $$asan $(ASAN_BUILD) fuzz $$fuzz $(FUZZ_BUILD); \
	[ $$plain = 0 ] && [ $$asan = 0 ] && [ $$fuzz = 0 ]

test-plain: build
	rm -f $(BUILD)/Testing/Temporary/LastTestsFailed.log
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: build-asan
	rm -f $(ASAN_BUILD)/Testing/Temporary/LastTestsFailed.log
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# the libFuzzer targets (clang; fuzz/CMakeLists.txt says how to run one)
fuzz: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DPD_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers

# each fuzz target a few seconds on its seed corpus, from the repository root
test-fuzz: fuzz
	rm -f $(FUZZ_BUILD)/Testing/Temporary/LastTestsFailed.log
	cd $(FUZZ_BUILD) && ctest --output-on-failure -j $(JOBS) -L fuzz

format:
	clang-format -i $$(git ls-files 'src/*.c' 'src/*.h' 'tests/*.c' 'fuzz/*.c')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
