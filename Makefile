# Tusko — GNU Make build.
#
#   make            build the four programs into build/
#   make run        install what is missing, build, start the whole stack (scripts/run.sh)
#   make test       install what is missing, build (plain and ASan+UBSan), run every test
#   make fuzz       run every fuzz target for FUZZ_SECONDS each (default 60)
#   make fmt        reformat the C sources with clang-format
#   make lint       clang-format check and cppcheck
#   make deps       install the Debian packages the project needs (scripts/deps.sh)
#
# Variants: SAN=1 builds with clang, AddressSanitizer and UndefinedBehaviorSanitizer
# into build/asan; FUZZ=1 builds libFuzzer targets into build/fuzz.

VERSION := 0.1.0
BUILD ?= build

PKGS := libmicrohttpd libcurl jansson libpq libsodium openssl libseccomp libzmq libcmark-gfm libidn2 zlib
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lcmark-gfm-extensions -lcap -lpthread -lm

WARN := -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes -Wmissing-prototypes \
        -Wno-unused-parameter -Wno-missing-field-initializers -Wformat=2 -Wno-format-nonliteral -Wvla
CPPFLAGS += -D_GNU_SOURCE -DTUSKO_VERSION='"$(VERSION)"' -Isrc -I$(BUILD)/gen
BASE_CFLAGS := -std=c17 $(WARN) -g -fno-strict-aliasing -MMD -MP $(PKG_CFLAGS)

ifeq ($(SAN),1)
  CC := clang
  BUILD := build/asan
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
  OPT := -O1
else ifeq ($(FUZZ),1)
  CC := clang
  BUILD := build/fuzz
  SANFLAGS := -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=all \
              -fno-omit-frame-pointer -DTK_FUZZING=1
  OPT := -O1
else
  CC := gcc
  OPT := -O2
  # snprintf truncation is our deliberate, safe behaviour for messages
  SANFLAGS := -Wno-format-truncation
endif

CFLAGS ?=
CFLAGS += $(BASE_CFLAGS) $(OPT) $(SANFLAGS)
LDFLAGS += $(SANFLAGS) -Wl,--as-needed
OBJ := $(BUILD)/obj

# Sources: every .c under a program's folder except its main.c goes into that
# program's archive, so unit tests can link against it.
LIB_SRC := $(sort $(wildcard src/lib/*.c))
APP_SRC := $(sort $(shell find src/app -name '*.c' ! -name main.c 2>/dev/null))
SBX_SRC := $(sort $(shell find src/sandboxd -name '*.c' ! -name main.c 2>/dev/null))
EXD_SRC := $(sort $(shell find src/execd -name '*.c' ! -name main.c 2>/dev/null))
BRD_SRC := $(sort $(shell find src/browserd -name '*.c' ! -name main.c 2>/dev/null))

# Files compiled into the tusko binary (migrations, web assets): scripts/embed.sh
# turns each listed folder into a C array table.
SQL_FILES := $(sort $(wildcard sql/*.sql))
WEB_FILES := $(sort $(shell find web -type f ! -name '.*' 2>/dev/null))
SKILL_FILES := $(sort $(shell find skills -type f ! -name '.*' 2>/dev/null))
OFFICE_FILES := src/app/tools/office/tusko_office.py
GEN_SRC := $(BUILD)/gen/embed_sql.c $(BUILD)/gen/embed_web.c $(BUILD)/gen/embed_skills.c \
  $(BUILD)/gen/embed_office.c
# Each set of embedded files is written to $(BUILD)/gen/<set>.list, touched only
# when the set changes; the tables depend on it, so a file added with an older
# time than the table (a checkout, a rebase) or a file removed rebuilds it.
file_list = $(shell mkdir -p $(BUILD)/gen && f=$(BUILD)/gen/$(1).list && \
  printf '%s\n' $(2) >$$f.new && { cmp -s $$f.new $$f && rm -f $$f.new || mv -f $$f.new $$f; })
$(call file_list,sql,$(SQL_FILES))
$(call file_list,web,$(WEB_FILES))
$(call file_list,skills,$(SKILL_FILES))
$(call file_list,office,$(OFFICE_FILES))

ifeq ($(V),1)
  Q :=
  say = @true
else
  Q := @
  say = @printf '  %-6s %s\n' $(1) $(2)
endif

objs = $(patsubst %.c,$(OBJ)/%.o,$(1))

LIB_A := $(BUILD)/libtusko.a
APP_A := $(BUILD)/app.a
SBX_A := $(BUILD)/sandboxd.a
EXD_A := $(BUILD)/execd.a
BRD_A := $(BUILD)/browserd.a

PROGRAMS := $(BUILD)/tusko $(BUILD)/tusko-sandboxd $(BUILD)/tusko-execd $(BUILD)/tusko-browserd

UNIT_SRC := $(sort $(wildcard tests/unit/*/test_*.c))
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))

FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN := $(patsubst tests/fuzz/%.c,build/fuzz/bin/%,$(FUZZ_SRC))

.PHONY: all programs tests run test test-quick fuzz fuzz-build fmt lint lint-cppcheck deps clean asan bench
all: programs tests

programs: $(PROGRAMS)
tests: $(UNIT_BIN)

$(OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(OBJ)/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-missing-prototypes -c -o $@ $<

$(BUILD)/gen/embed_sql.c: $(SQL_FILES) $(BUILD)/gen/sql.list scripts/embed.sh
	@mkdir -p $(dir $@)
	$(call say,EMBED,$@)
	$(Q)scripts/embed.sh sql sql $@ $(SQL_FILES)
$(BUILD)/gen/embed_web.c: $(WEB_FILES) $(BUILD)/gen/web.list scripts/embed.sh
	@mkdir -p $(dir $@)
	$(call say,EMBED,$@)
	$(Q)scripts/embed.sh web web $@ $(WEB_FILES)
$(BUILD)/gen/embed_skills.c: $(SKILL_FILES) $(BUILD)/gen/skills.list scripts/embed.sh
	@mkdir -p $(dir $@)
	$(call say,EMBED,$@)
	$(Q)scripts/embed.sh skills skills $@ $(SKILL_FILES)
$(BUILD)/gen/embed_office.c: $(OFFICE_FILES) $(BUILD)/gen/office.list scripts/embed.sh
	@mkdir -p $(dir $@)
	$(call say,EMBED,$@)
	$(Q)scripts/embed.sh office src/app/tools/office $@ $(OFFICE_FILES)

$(LIB_A): $(call objs,$(LIB_SRC))
$(APP_A): $(call objs,$(APP_SRC)) $(patsubst $(BUILD)/gen/%.c,$(OBJ)/gen/%.o,$(GEN_SRC))
$(SBX_A): $(call objs,$(SBX_SRC))
$(EXD_A): $(call objs,$(EXD_SRC))
$(BRD_A): $(call objs,$(BRD_SRC))
$(BUILD)/%.a:
	@mkdir -p $(dir $@)
	@rm -f $@
	$(call say,AR,$@)
	$(Q)ar rcs $@ $^

$(BUILD)/tusko: $(OBJ)/src/app/main.o $(APP_A) $(LIB_A)
$(BUILD)/tusko-sandboxd: $(OBJ)/src/sandboxd/main.o $(SBX_A) $(LIB_A)
$(BUILD)/tusko-execd: $(OBJ)/src/execd/main.o $(EXD_A) $(LIB_A)
$(BUILD)/tusko-browserd: $(OBJ)/src/browserd/main.o $(BRD_A) $(LIB_A)
$(PROGRAMS):
	$(call say,LINK,$@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS)

# A unit test in tests/unit/<area>/ links against that area's archive.
area_a = $(if $(filter lib,$(1)),,$(BUILD)/$(if $(filter app,$(1)),app,$(1)).a)
.SECONDEXPANSION:
$(BUILD)/tests/%: tests/unit/%.c tests/unit/tk_test.h $$(call area_a,$$(firstword $$(subst /, ,$$*))) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,TEST,$@)
	@mkdir -p $(OBJ)/tests/$(dir $*)
	$(Q)$(CC) $(CPPFLAGS) -Itests/unit $(CFLAGS) -MF $(OBJ)/tests/$*.d -Wno-missing-prototypes $(LDFLAGS) -o $@ $(filter %.c %.a,$^) $(PKG_LIBS)

# Fuzz targets: clang + libFuzzer against the core compiled with sanitizers.
fuzz-build:
	@$(MAKE) --no-print-directory FUZZ=1 $(FUZZ_BIN)
build/fuzz/bin/%: tests/fuzz/%.c $(EXD_A) $(APP_A) $(SBX_A) $(BRD_A) $(LIB_A)
	@mkdir -p $(dir $@)
	$(call say,FUZZ,$@)
	@mkdir -p $(OBJ)/fuzz
	$(Q)$(CC) $(CPPFLAGS) $(CFLAGS) -MF $(OBJ)/fuzz/$*.d -Wno-missing-prototypes -fsanitize=fuzzer $(LDFLAGS) -o $@ $(filter %.c %.a,$^) $(PKG_LIBS)

FUZZ_SECONDS ?= 60
fuzz: fuzz-build
	scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_BIN)

asan:
	@$(MAKE) --no-print-directory SAN=1 all

deps:
	scripts/deps.sh

run: deps
	@$(MAKE) --no-print-directory all
	scripts/run.sh

# The whole suite: plain and sanitizer builds, unit, integration, e2e, brief fuzzing.
test: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory SAN=1 all
	@$(MAKE) --no-print-directory fuzz-build
	tests/run.sh

bench: deps
	@$(MAKE) --no-print-directory all
	bench/run.sh

C_FILES = $(shell find src tests/unit tests/fuzz bench -name '*.[ch]' 2>/dev/null)
fmt:
	clang-format -i $(C_FILES)
# cppcheck's varFuncNullUB is off: tk_json_obj(...) ends its pairs with NULL,
# which glibc defines as ((void *)0), a pointer, so the sentinel is well defined.
lint: lint-cppcheck
	clang-format --dry-run --Werror $(C_FILES)
lint-cppcheck:
	cppcheck --quiet --error-exitcode=1 --std=c11 --enable=warning,portability \
	  --suppress=missingIncludeSystem --suppress=varFuncNullUB --inline-suppr \
	  -D_GNU_SOURCE -Isrc --include=/usr/include/jansson.h src

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
