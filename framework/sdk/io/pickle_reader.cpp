#include "io/pickle_reader.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <iterator>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace bertlab {

namespace {

/// The opcodes this reader understands, named as in CPython's Lib/pickle.py.
enum Opcode : uint8_t {
  kMark = '(',
  kStop = '.',
  kPop = '0',
  kPopMark = '1',
  kBinFloat = 'G',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNone = 'N',
  kBinPersId = 'Q',
  kReduce = 'R',
  kBinString = 'T',
  kShortBinString = 'U',
  kBinUnicode = 'X',
  kBinBytes = 'B',
  kShortBinBytes = 'C',
  kAppend = 'a',
  kBuild = 'b',
  kGlobal = 'c',
  kDict = 'd',
  kAppends = 'e',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kList = 'l',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kSetItems = 'u',
  kEmptyTuple = ')',
  kEmptyList = ']',
  kEmptyDict = '}',
  kProto = 0x80,
  kNewObj = 0x81,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
  kLong4 = 0x8b,
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kBinBytes8 = 0x8e,
  kStackGlobal = 0x93,
  kMemoize = 0x94,
  kFrame = 0x95,
};

struct OpcodeName {
  uint8_t code;
  const char* name;
};

constexpr OpcodeName kOpcodeNames[] = {
    {kMark, "MARK"},
    {kStop, "STOP"},
    {kPop, "POP"},
    {kPopMark, "POP_MARK"},
    {kBinFloat, "BINFLOAT"},
    {kBinInt, "BININT"},
    {kBinInt1, "BININT1"},
    {kBinInt2, "BININT2"},
    {kNone, "NONE"},
    {kBinPersId, "BINPERSID"},
    {kReduce, "REDUCE"},
    {kBinString, "BINSTRING"},
    {kShortBinString, "SHORT_BINSTRING"},
    {kBinUnicode, "BINUNICODE"},
    {kBinBytes, "BINBYTES"},
    {kShortBinBytes, "SHORT_BINBYTES"},
    {kAppend, "APPEND"},
    {kBuild, "BUILD"},
    {kGlobal, "GLOBAL"},
    {kDict, "DICT"},
    {kAppends, "APPENDS"},
    {kBinGet, "BINGET"},
    {kLongBinGet, "LONG_BINGET"},
    {kList, "LIST"},
    {kBinPut, "BINPUT"},
    {kLongBinPut, "LONG_BINPUT"},
    {kSetItem, "SETITEM"},
    {kTuple, "TUPLE"},
    {kSetItems, "SETITEMS"},
    {kEmptyTuple, "EMPTY_TUPLE"},
    {kEmptyList, "EMPTY_LIST"},
    {kEmptyDict, "EMPTY_DICT"},
    {kProto, "PROTO"},
    {kNewObj, "NEWOBJ"},
    {kTuple1, "TUPLE1"},
    {kTuple2, "TUPLE2"},
    {kTuple3, "TUPLE3"},
    {kNewTrue, "NEWTRUE"},
    {kNewFalse, "NEWFALSE"},
    {kLong1, "LONG1"},
    {kLong4, "LONG4"},
    {kShortBinUnicode, "SHORT_BINUNICODE"},
    {kBinUnicode8, "BINUNICODE8"},
    {kBinBytes8, "BINBYTES8"},
    {kStackGlobal, "STACK_GLOBAL"},
    {kMemoize, "MEMOIZE"},
    {kFrame, "FRAME"},
};

/// The opcode's name in CPython's pickle.py, nullptr for a byte that is no opcode read here.
const char* opcode_name(uint8_t op) {
  for (const auto& o : kOpcodeNames) {
    if (o.code == op) return o.name;
  }
  return nullptr;
}

/// What a resolved global does when the pickle calls it (REDUCE, NEWOBJ).
enum class Callable : uint8_t {
  kOrderedDict,       ///< collections.OrderedDict(): an empty dict
  kRebuildTensorV2,   ///< (storage, offset, size, stride, requires_grad, hooks[, metadata])
  kRebuildTensor,     ///< (storage, offset, size, stride), torch < 1.0
  kRebuildParameter,  ///< (tensor, requires_grad, hooks): the tensor itself
  kStorageType,       ///< torch.FloatStorage, ...: only named inside persistent ids
};

struct AllowedGlobal {
  const char* module;
  const char* name;
  Callable callable;
  at::ScalarType dtype;  ///< of a storage type; unused otherwise
};

/// The only globals a checkpoint may reference: those torch.save writes for a state dict.
constexpr AllowedGlobal kAllowedGlobals[] = {
    {"collections", "OrderedDict", Callable::kOrderedDict, at::kByte},
    {"torch._utils", "_rebuild_tensor_v2", Callable::kRebuildTensorV2, at::kByte},
    {"torch._utils", "_rebuild_tensor", Callable::kRebuildTensor, at::kByte},
    {"torch._utils", "_rebuild_parameter", Callable::kRebuildParameter, at::kByte},
    {"torch", "FloatStorage", Callable::kStorageType, at::kFloat},
    {"torch", "DoubleStorage", Callable::kStorageType, at::kDouble},
    {"torch", "HalfStorage", Callable::kStorageType, at::kHalf},
    {"torch", "BFloat16Storage", Callable::kStorageType, at::kBFloat16},
    {"torch", "LongStorage", Callable::kStorageType, at::kLong},
    {"torch", "IntStorage", Callable::kStorageType, at::kInt},
    {"torch", "ShortStorage", Callable::kStorageType, at::kShort},
    {"torch", "CharStorage", Callable::kStorageType, at::kChar},
    {"torch", "ByteStorage", Callable::kStorageType, at::kByte},
    {"torch", "BoolStorage", Callable::kStorageType, at::kBool},
};

/// "collections.OrderedDict, ..., torch.<Float|Double|...>Storage", for error messages.
std::string allowed_globals_list() {
  std::vector<std::string> functions;
  std::vector<std::string> storages;
  for (const auto& g : kAllowedGlobals) {
    if (g.callable == Callable::kStorageType) {
      std::string name = g.name;
      storages.push_back(name.substr(0, name.size() - std::strlen("Storage")));
    } else {
      functions.push_back(fmt::format("{}.{}", g.module, g.name));
    }
  }
  return fmt::format("{}, torch.<{}>Storage", fmt::join(functions, ", "), fmt::join(storages, "|"));
}

/// `text` cut to its first 100 bytes, for an error message.
std::string shortened(std::string_view text) {
  constexpr size_t kMax = 100;
  return text.size() <= kMax ? std::string(text) : std::string(text.substr(0, kMax)) + "...";
}

/// Tensors built from one storage may together hold at most this many times its bytes: tied
/// weights repeat a tensor (2x); a hostile pickle rebuilding one large storage thousands of times
/// would otherwise allocate without bound.
constexpr uint64_t kMaxTensorBytesPerStorageByte = 4;
/// Dicts nested deeper than this are refused (a state dict nests a few levels at most).
constexpr int kMaxNesting = 64;
/// The longest flattened tensor name accepted (Hugging Face's are under 200 bytes).
constexpr size_t kMaxNameBytes = 4096;

enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kBytes,
  kTuple,
  kList,
  kDict,
  kGlobal,
  kStorage,
  kTensor,
};

/// Python's name of each Kind, indexed by it.
constexpr const char* kKindNames[] = {"None",  "bool", "int",  "float",  "str",     "bytes",
                                      "tuple", "list", "dict", "global", "storage", "tensor"};

const char* kind_name(Kind kind) { return kKindNames[static_cast<size_t>(kind)]; }

/// One pickle value, plain data. Strings, containers, storages and tensors live in the
/// Unpickler's arenas and are referred to by index, so copying a value (the memo, BINGET) never
/// copies what it holds, and containers that nest deeply or contain themselves cannot make a
/// destructor recurse.
struct Value {
  Kind kind = Kind::kNone;
  /// kBool, kInt: the number; kFloat: the IEEE bits; kGlobal: index into kAllowedGlobals;
  /// the others: index into the arena of their kind.
  uint64_t payload = 0;

  int64_t number() const { return static_cast<int64_t>(payload); }
};

Value make(Kind kind, uint64_t payload = 0) { return Value{kind, payload}; }
Value make_int(int64_t v) { return Value{Kind::kInt, static_cast<uint64_t>(v)}; }

/// A storage record, copied once into a 1-D tensor of its dtype.
struct Storage {
  std::string key;
  at::Tensor data;
  uint64_t bytes = 0;
  uint64_t tensor_bytes = 0;  ///< bytes of the tensors built from it so far
};

class Unpickler {
 public:
  Unpickler(std::string_view pickle, const StorageRecordLoader& load_record,
            const std::string& source)
      : in_(pickle), load_record_(load_record), source_(source) {}

  NamedTensors state_dict() {
    const Value top = load();
    if (top.kind != Kind::kDict) {
      throw DataError(
          fmt::format("{}: the pickle holds a {}, not a dict of tensors; save a state dict "
                      "(torch.save(model.state_dict(), f))",
                      source_, kind_name(top.kind)));
    }
    NamedTensors out;
    std::unordered_set<std::string> names;
    std::vector<bool> visited(dicts_.size(), false);
    flatten(top.payload, "", 0, visited, names, out);
    return out;
  }

 private:
  // --- Errors and bounded reads -----------------------------------------------------------

  [[noreturn]] void fail(const std::string& what) const {
    const char* name = opcode_name(op_);
    throw DataError(fmt::format("{}: byte {} ({}): {}", source_, op_pos_,
                                name != nullptr ? name : "unknown opcode", what));
  }

  std::string_view take(uint64_t n) {
    const uint64_t left = in_.size() - pos_;
    if (n > left) {
      fail(fmt::format("needs {} more bytes, but the pickle ends {} bytes later (truncated?)", n,
                       left));
    }
    std::string_view bytes = in_.substr(pos_, n);
    pos_ += n;
    return bytes;
  }

  /// An unsigned little-endian integer of `n` (<= 8) bytes.
  uint64_t read_le(size_t n) {
    const std::string_view b = take(n);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(b[i]);
    return v;
  }

  int32_t read_i32() { return static_cast<int32_t>(static_cast<uint32_t>(read_le(4))); }

  /// BINSTRING's and LONG4's length: a signed 4-byte count that must not be negative.
  uint64_t read_byte_count() {
    const int32_t n = read_i32();
    if (n < 0) fail("has a negative byte count");
    return static_cast<uint64_t>(n);
  }

  /// LONG1/LONG4's payload: `n` bytes of little-endian two's complement.
  int64_t read_long(uint64_t n) {
    if (n > 8) fail(fmt::format("an integer of {} bytes does not fit in 64 bits", n));
    if (n == 0) return 0;
    uint64_t v = read_le(static_cast<size_t>(n));
    if (n < 8 && (v >> (8 * n - 1)) != 0) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<int64_t>(v);
  }

  /// GLOBAL's arguments: text up to the next newline.
  std::string_view read_line() {
    const size_t end = in_.find('\n', pos_);
    if (end == std::string_view::npos) {
      fail("its newline-terminated argument runs past the end of the pickle (truncated?)");
    }
    std::string_view line = in_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return line;
  }

  // --- The stack ------------------------------------------------------------------------------

  size_t stack_floor() const { return marks_.empty() ? 0 : marks_.back(); }

  void push(Value v) { stack_.push_back(v); }

  Value pop() {
    if (stack_.size() <= stack_floor()) fail("pops from an empty stack (corrupt pickle)");
    const Value v = stack_.back();
    stack_.pop_back();
    return v;
  }

  Value top() const {
    if (stack_.size() <= stack_floor()) fail("needs a value, but the stack is empty");
    return stack_.back();
  }

  /// The values pushed since the last MARK, which is removed.
  std::vector<Value> pop_mark() {
    if (marks_.empty()) fail("needs a MARK, but there is none (corrupt pickle)");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<Value> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }

  std::vector<Value> pop_n(size_t n) {
    if (stack_.size() - stack_floor() < n) {
      fail(
          fmt::format("needs {} values, but the stack holds {}", n, stack_.size() - stack_floor()));
    }
    std::vector<Value> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    return items;
  }

  // --- Building values ------------------------------------------------------------------------

  Value text(Kind kind, std::string_view bytes) {
    texts_.push_back(bytes);
    return make(kind, texts_.size() - 1);
  }

  Value sequence(Kind kind, std::vector<Value> items) {
    sequences_.push_back(std::move(items));
    return make(kind, sequences_.size() - 1);
  }

  Value new_dict() {
    dicts_.emplace_back();
    return make(Kind::kDict, dicts_.size() - 1);
  }

  /// The dict `target` (a value on the stack) receives `items` as key, value, key, value, ...
  /// Keys are not deduplicated: torch.save never repeats one, and flatten() refuses a tensor
  /// name given twice.
  void set_items(const Value& target, const std::vector<Value>& items) {
    if (target.kind != Kind::kDict) {
      fail(fmt::format("sets items on a {}, not a dict", kind_name(target.kind)));
    }
    if (items.size() % 2 != 0) fail("has a key without a value");
    auto& dict = dicts_[target.payload];
    for (size_t i = 0; i < items.size(); i += 2) dict.emplace_back(items[i], items[i + 1]);
  }

  void append(const Value& target, const std::vector<Value>& items) {
    if (target.kind != Kind::kList) {
      fail(fmt::format("appends to a {}, not a list", kind_name(target.kind)));
    }
    auto& list = sequences_[target.payload];
    list.insert(list.end(), items.begin(), items.end());
  }

  Value memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail(fmt::format("memo entry {} was never stored", index));
    return it->second;
  }

  void memo_put(uint64_t index) { memo_[index] = top(); }

  std::string_view string_of(const Value& v, const char* what) {
    if (v.kind != Kind::kString) {
      fail(fmt::format("{} is a {}, not a str", what, kind_name(v.kind)));
    }
    return texts_[v.payload];
  }

  /// GLOBAL and STACK_GLOBAL: refuses, before anything is built, every global but the
  /// tensor-rebuilding ones.
  Value resolve_global(std::string_view module, std::string_view name) {
    for (size_t i = 0; i < std::size(kAllowedGlobals); ++i) {
      if (module == kAllowedGlobals[i].module && name == kAllowedGlobals[i].name) {
        return make(Kind::kGlobal, i);
      }
    }
    throw DataError(
        fmt::format("{} references the Python global '{}.{}' (byte {}); a checkpoint may only "
                    "rebuild tensors (allowed: {}), so it was not loaded",
                    source_, shortened(module), shortened(name), op_pos_, allowed_globals_list()));
  }

  const AllowedGlobal& global_of(const Value& v, const char* what) {
    if (v.kind != Kind::kGlobal) {
      fail(fmt::format("{} is a {}, not a global", what, kind_name(v.kind)));
    }
    return kAllowedGlobals[v.payload];
  }

  /// REDUCE: callable(*args).
  Value call(const Value& callable, const Value& args_value) {
    const AllowedGlobal& g = global_of(callable, "the callable");
    if (args_value.kind != Kind::kTuple) {
      fail(fmt::format("calls {}.{} with a {}, not a tuple of arguments", g.module, g.name,
                       kind_name(args_value.kind)));
    }
    const std::vector<Value> args = sequences_[args_value.payload];
    auto expect_args = [&](bool ok, const char* expected) {
      if (!ok) {
        fail(fmt::format("calls {}.{} with {} arguments, expected {}", g.module, g.name,
                         args.size(), expected));
      }
    };
    switch (g.callable) {
      case Callable::kOrderedDict:
        // torch.save writes OrderedDict() and then the items (SETITEMS).
        expect_args(args.empty(), "none");
        return new_dict();
      case Callable::kRebuildTensorV2:
        expect_args(args.size() == 6 || args.size() == 7, "6 or 7");
        return rebuild_tensor(args);
      case Callable::kRebuildTensor:
        expect_args(args.size() == 4, "4");
        return rebuild_tensor(args);
      case Callable::kRebuildParameter:
        expect_args(args.size() == 3, "3");
        if (args[0].kind != Kind::kTensor) {
          fail(
              fmt::format("rebuilds a parameter from a {}, not a tensor", kind_name(args[0].kind)));
        }
        return args[0];
      case Callable::kStorageType:
        break;
    }
    fail(fmt::format("calls the storage type {}.{}; storages come only from persistent ids",
                     g.module, g.name));
  }

  std::vector<int64_t> dims_of(const Value& v, const char* what) {
    if (v.kind != Kind::kTuple && v.kind != Kind::kList) {
      fail(fmt::format("the tensor's {} is a {}, not a tuple", what, kind_name(v.kind)));
    }
    std::vector<int64_t> dims;
    for (const Value& d : sequences_[v.payload]) {
      if (d.kind != Kind::kInt || d.number() < 0) {
        fail(fmt::format("the tensor's {} holds a {}, not a non-negative int", what,
                         d.kind == Kind::kInt ? "negative int" : kind_name(d.kind)));
      }
      dims.push_back(d.number());
    }
    return dims;
  }

  /// torch._utils._rebuild_tensor(_v2): storage.as_strided(size, stride, offset), copied into a
  /// contiguous tensor once the view is known to lie inside the storage.
  Value rebuild_tensor(const std::vector<Value>& args) {
    if (args[0].kind != Kind::kStorage) {
      fail(fmt::format("rebuilds a tensor from a {}, not a storage (persistent id)",
                       kind_name(args[0].kind)));
    }
    Storage& storage = storages_[args[0].payload];
    if (args[1].kind != Kind::kInt || args[1].number() < 0) {
      fail("the tensor's storage offset is not a non-negative int");
    }
    const uint64_t offset = args[1].payload;
    const std::vector<int64_t> size = dims_of(args[2], "size");
    const std::vector<int64_t> stride = dims_of(args[3], "stride");
    const uint64_t capacity = static_cast<uint64_t>(storage.data.numel());
    auto out_of_storage = [&](const std::string& why) {
      fail(fmt::format(
          "a tensor of size [{}], stride [{}] and offset {} {}; its storage data/{} "
          "holds {} elements (corrupt checkpoint)",
          fmt::join(size, ", "), fmt::join(stride, ", "), offset, why, storage.key, capacity));
    };
    if (size.size() != stride.size()) out_of_storage("has not one stride per dimension");
    bool empty = false;
    for (int64_t d : size) empty = empty || d == 0;
    uint64_t numel = empty ? 0 : 1;
    uint64_t last = offset;  // index of the view's last element in the storage
    for (size_t i = 0; i < size.size() && !empty; ++i) {
      const auto d = static_cast<uint64_t>(size[i]);
      uint64_t step = 0;
      if (__builtin_mul_overflow(numel, d, &numel) ||
          __builtin_mul_overflow(d - 1, static_cast<uint64_t>(stride[i]), &step) ||
          __builtin_add_overflow(last, step, &last)) {
        out_of_storage("overflows 64-bit indexing");
      }
    }
    if (empty ? offset > capacity : last >= capacity) out_of_storage("does not fit");
    // Each view is at most its storage's size: a state dict holds no expanded (stride-0) views.
    if (numel > capacity) out_of_storage("repeats elements (an expanded view)");
    const uint64_t bytes = numel * storage.data.element_size();
    storage.tensor_bytes += bytes;
    if (storage.tensor_bytes > kMaxTensorBytesPerStorageByte * storage.bytes) {
      fail(fmt::format(
          "the tensors built from storage data/{} would hold {} bytes, more than {} "
          "times its {} bytes (a hostile checkpoint?)",
          storage.key, storage.tensor_bytes, kMaxTensorBytesPerStorageByte, storage.bytes));
    }
    at::Tensor t = storage.data.as_strided(size, stride, static_cast<int64_t>(offset))
                       .clone(at::MemoryFormat::Contiguous);
    tensors_.push_back(std::move(t));
    return make(Kind::kTensor, tensors_.size() - 1);
  }

  /// BINPERSID: torch.save's ('storage', storage_type, key, location, numel) names the record
  /// data/<key>. The location (cpu, cuda:0) is ignored: everything loads on the CPU.
  Value persistent_load(const Value& pid) {
    if (pid.kind != Kind::kTuple || sequences_[pid.payload].size() != 5) {
      fail("the persistent id is not a tuple ('storage', type, key, location, numel)");
    }
    const std::vector<Value> id = sequences_[pid.payload];
    if (string_of(id[0], "the persistent id's tag") != "storage") {
      fail(fmt::format("the persistent id's tag is '{}', not 'storage'",
                       shortened(texts_[id[0].payload])));
    }
    const AllowedGlobal& type = global_of(id[1], "the storage type");
    if (type.callable != Callable::kStorageType) {
      fail(fmt::format("the storage type is {}.{}, not a torch.*Storage", type.module, type.name));
    }
    const std::string key(string_of(id[2], "the storage key"));
    if (id[4].kind != Kind::kInt || id[4].number() < 0) {
      fail("the storage's element count is not a non-negative int");
    }
    const uint64_t numel = id[4].payload;
    const auto found = storage_by_key_.find(key);
    if (found != storage_by_key_.end()) {
      const Storage& s = storages_[found->second];
      if (s.data.scalar_type() != type.dtype || static_cast<uint64_t>(s.data.numel()) != numel) {
        fail(fmt::format("storage data/{} was {} elements of {}, now {} of {}", key, s.data.numel(),
                         c10::toString(s.data.scalar_type()), numel, c10::toString(type.dtype)));
      }
      return make(Kind::kStorage, found->second);
    }
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(numel, c10::elementSize(type.dtype), &bytes)) {
      fail(fmt::format("storage data/{} of {} elements overflows 64 bits", key, numel));
    }
    const at::Tensor record = load_record_(key);
    if (!record.defined() || record.scalar_type() != at::kByte || record.dim() != 1 ||
        !record.is_contiguous() || !record.device().is_cpu()) {
      fail(fmt::format("the record loader returned no 1-D CPU uint8 tensor for data/{}", key));
    }
    if (static_cast<uint64_t>(record.numel()) != bytes) {
      fail(
          fmt::format("record data/{} holds {} bytes, but the pickle describes {} elements of {} "
                      "({} bytes)",
                      key, record.numel(), numel, c10::toString(type.dtype), bytes));
    }
    const auto* raw = static_cast<const uint8_t*>(record.data_ptr());
    if (type.dtype == at::kBool) {
      for (uint64_t i = 0; i < bytes; ++i) {
        if (raw[i] > 1) {
          fail(fmt::format("bool storage data/{} holds byte {} at {}, not 0 or 1", key, raw[i], i));
        }
      }
    }
    Storage storage;
    storage.key = key;
    storage.bytes = bytes;
    storage.data = at::empty({static_cast<int64_t>(numel)}, at::TensorOptions().dtype(type.dtype));
    if (bytes > 0) std::memcpy(storage.data.data_ptr(), raw, bytes);
    storages_.push_back(std::move(storage));
    storage_by_key_.emplace(key, storages_.size() - 1);
    return make(Kind::kStorage, storages_.size() - 1);
  }

  // --- The interpreter ------------------------------------------------------------------------

  Value load() {
    for (;;) {
      if (pos_ >= in_.size()) {
        throw DataError(fmt::format("{}: ends at byte {} without a STOP opcode (truncated?)",
                                    source_, in_.size()));
      }
      op_pos_ = pos_;
      op_ = static_cast<uint8_t>(in_[pos_++]);
      if (op_ == kStop) return pop();
      step();
    }
  }

  void step() {
    switch (op_) {
      case kProto: {
        const uint64_t version = read_le(1);
        if (version > 5) fail(fmt::format("pickle protocol {} is newer than 5", version));
        break;
      }
      case kFrame: {
        // A frame only announces how many bytes of opcodes follow; they are read as usual.
        const uint64_t length = read_le(8);
        if (length > in_.size() - pos_) {
          fail(fmt::format("announces {} bytes, but the pickle ends {} bytes later (truncated?)",
                           length, in_.size() - pos_));
        }
        break;
      }
      case kMark:
        marks_.push_back(stack_.size());
        break;
      case kPop:
        pop();
        break;
      case kPopMark:
        pop_mark();
        break;
      case kNone:
        push(make(Kind::kNone));
        break;
      case kNewTrue:
        push(make(Kind::kBool, 1));
        break;
      case kNewFalse:
        push(make(Kind::kBool, 0));
        break;
      case kBinInt:
        push(make_int(read_i32()));
        break;
      case kBinInt1:
        push(make_int(static_cast<int64_t>(read_le(1))));
        break;
      case kBinInt2:
        push(make_int(static_cast<int64_t>(read_le(2))));
        break;
      case kLong1:
        push(make_int(read_long(read_le(1))));
        break;
      case kLong4:
        push(make_int(read_long(read_byte_count())));
        break;
      case kBinFloat: {
        const std::string_view b = take(8);  // big-endian IEEE 754
        uint64_t bits = 0;
        for (char c : b) bits = (bits << 8) | static_cast<uint8_t>(c);
        push(make(Kind::kFloat, bits));
        break;
      }
      // A Python 2 str (SHORT_BINSTRING, BINSTRING) is read as text, as
      // torch.load(encoding="utf-8") would.
      case kShortBinUnicode:
      case kShortBinString:
        push(text(Kind::kString, take(read_le(1))));
        break;
      case kBinUnicode:
        push(text(Kind::kString, take(read_le(4))));
        break;
      case kBinUnicode8:
        push(text(Kind::kString, take(read_le(8))));
        break;
      case kBinString:
        push(text(Kind::kString, take(read_byte_count())));
        break;
      case kShortBinBytes:
        push(text(Kind::kBytes, take(read_le(1))));
        break;
      case kBinBytes:
        push(text(Kind::kBytes, take(read_le(4))));
        break;
      case kBinBytes8:
        push(text(Kind::kBytes, take(read_le(8))));
        break;
      case kEmptyTuple:
        push(sequence(Kind::kTuple, {}));
        break;
      case kTuple:
        push(sequence(Kind::kTuple, pop_mark()));
        break;
      case kTuple1:
        push(sequence(Kind::kTuple, pop_n(1)));
        break;
      case kTuple2:
        push(sequence(Kind::kTuple, pop_n(2)));
        break;
      case kTuple3:
        push(sequence(Kind::kTuple, pop_n(3)));
        break;
      case kEmptyList:
        push(sequence(Kind::kList, {}));
        break;
      case kList:
        push(sequence(Kind::kList, pop_mark()));
        break;
      case kAppend: {
        const Value item = pop();
        append(top(), {item});
        break;
      }
      case kAppends: {
        const std::vector<Value> items = pop_mark();
        append(top(), items);
        break;
      }
      case kEmptyDict:
        push(new_dict());
        break;
      case kDict: {
        const std::vector<Value> items = pop_mark();
        const Value dict = new_dict();
        set_items(dict, items);
        push(dict);
        break;
      }
      case kSetItem: {
        const std::vector<Value> item = pop_n(2);
        set_items(top(), item);
        break;
      }
      case kSetItems: {
        const std::vector<Value> items = pop_mark();
        set_items(top(), items);
        break;
      }
      case kGlobal: {
        const std::string_view module = read_line();
        const std::string_view name = read_line();
        push(resolve_global(module, name));
        break;
      }
      case kStackGlobal: {
        const Value name = pop();
        const Value module = pop();
        push(resolve_global(string_of(module, "the module"), string_of(name, "the name")));
        break;
      }
      case kReduce: {
        const Value args = pop();
        const Value callable = pop();
        push(call(callable, args));
        break;
      }
      case kNewObj: {
        const Value args = pop();
        const Value cls = pop();
        const AllowedGlobal& g = global_of(cls, "the class");
        if (g.callable != Callable::kOrderedDict || args.kind != Kind::kTuple ||
            !sequences_[args.payload].empty()) {
          fail(fmt::format("creates a {}.{} object; only OrderedDict() is accepted", g.module,
                           g.name));
        }
        push(new_dict());
        break;
      }
      case kBuild: {
        pop();  // the state: Hugging Face's _metadata attribute of the OrderedDict, ignored
        const Value target = top();
        if (target.kind != Kind::kDict) {
          fail(fmt::format("sets the state of a {}; only an OrderedDict's (ignored) is accepted",
                           kind_name(target.kind)));
        }
        break;
      }
      case kBinPersId:
        push(persistent_load(pop()));
        break;
      case kBinGet:
        push(memo_get(read_le(1)));
        break;
      case kLongBinGet:
        push(memo_get(read_le(4)));
        break;
      case kBinPut:
        memo_put(read_le(1));
        break;
      case kLongBinPut:
        memo_put(read_le(4));
        break;
      case kMemoize:
        memo_put(memo_.size());
        break;
      default:
        fail(
            fmt::format("byte 0x{:02x} is no opcode torch.save writes (corrupt checkpoint?)", op_));
    }
  }

  // --- The result -----------------------------------------------------------------------------

  void flatten(uint64_t dict, const std::string& prefix, int depth, std::vector<bool>& visited,
               std::unordered_set<std::string>& names, NamedTensors& out) const {
    const std::string where = prefix.empty() ? "the top-level dict" : "dict '" + prefix + "'";
    if (depth > kMaxNesting) {
      throw DataError(
          fmt::format("{}: {} nests dicts more than {} levels deep", source_, where, kMaxNesting));
    }
    if (visited[dict]) {
      throw DataError(
          fmt::format("{}: {} is reachable twice (or contains itself); a state dict is a tree",
                      source_, where));
    }
    visited[dict] = true;
    for (const auto& [key, value] : dicts_[dict]) {
      if (key.kind != Kind::kString) {
        throw DataError(
            fmt::format("{}: {} has a key of type {}, not str; a state dict is keyed by "
                        "tensor names",
                        source_, where, kind_name(key.kind)));
      }
      const std::string_view k = texts_[key.payload];
      if (prefix.size() + 1 + k.size() > kMaxNameBytes) {
        throw DataError(fmt::format("{}: {} has a key that makes a name longer than {} bytes",
                                    source_, where, kMaxNameBytes));
      }
      std::string name = prefix.empty() ? std::string(k) : fmt::format("{}.{}", prefix, k);
      if (value.kind == Kind::kTensor) {
        if (!names.insert(name).second) {
          throw DataError(fmt::format("{}: the tensor '{}' is given twice", source_, name));
        }
        out.emplace_back(std::move(name), tensors_[value.payload]);
      } else if (value.kind == Kind::kDict) {
        flatten(value.payload, name, depth + 1, visited, names, out);
      }
    }
  }

  std::string_view in_;
  const StorageRecordLoader& load_record_;
  const std::string& source_;
  size_t pos_ = 0;     ///< next byte to read
  size_t op_pos_ = 0;  ///< where the current opcode starts
  uint8_t op_ = 0;     ///< the current opcode

  std::vector<Value> stack_;
  std::vector<size_t> marks_;  ///< [mark] stack_ size when MARK ran
  std::unordered_map<uint64_t, Value> memo_;

  // Arenas, indexed by Value::payload.
  std::vector<std::string_view> texts_;                      ///< views into in_
  std::vector<std::vector<Value>> sequences_;                ///< tuples and lists
  std::vector<std::vector<std::pair<Value, Value>>> dicts_;  ///< items in insertion order
  std::vector<Storage> storages_;
  std::unordered_map<std::string, size_t> storage_by_key_;  ///< key -> storages_ index
  std::vector<at::Tensor> tensors_;
};

}  // namespace

NamedTensors unpickle_state_dict(std::string_view pickle, const StorageRecordLoader& load_record,
                                 const std::string& source) {
  return Unpickler(pickle, load_record, source).state_dict();
}

}  // namespace bertlab
