// Safetensors reader: files written here by hand per the format spec
// (u64 LE header length, JSON header, byte buffer), round trip and errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/weights/safetensors.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pagoda_st_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes header JSON + bytes as a .safetensors file; returns its path.
  std::string write(const std::string& name, const std::string& header, const std::string& bytes,
                    int64_t claimed_len = -1) {
    const fs::path p = dir_ / name;
    std::ofstream out(p, std::ios::binary);
    uint64_t n = claimed_len >= 0 ? static_cast<uint64_t>(claimed_len) : header.size();
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
    out << header << bytes;
    return p.string();
  }
  std::string error_opening(const std::string& path) {
    try {
      SafetensorsFile f(path);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

std::string float_bytes(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

TEST_F(SafetensorsTest, RoundTripsF32AndBf16WithMetadata) {
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  std::string bytes = float_bytes(a);
  const uint16_t bf[2] = {0x3f80, 0xc000};  // 1.0, -2.0 in bfloat16
  bytes.append(reinterpret_cast<const char*>(bf), 4);
  const std::string header =
      R"({"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},)"
      R"( "b": {"dtype": "BF16", "shape": [2], "data_offsets": [24, 28]},)"
      R"( "c": {"dtype": "I8", "shape": [0], "data_offsets": [28, 28]}})";
  const std::string path = write("model.safetensors", header, bytes);
  SafetensorsFile f(path);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.names(), (std::vector<std::string>{"a", "b", "c"}));
  const SafetensorsTensor& ta = f.get("a");
  EXPECT_EQ(ta.dtype, DType::F32);
  EXPECT_EQ(ta.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ta.nbytes, 24u);
  EXPECT_EQ(std::memcmp(ta.data, a.data(), 24), 0);
  const SafetensorsTensor& tb = f.get("b");
  EXPECT_EQ(tb.dtype, DType::BF16);
  EXPECT_EQ(std::memcmp(tb.data, bf, 4), 0);
  // I8 is listed by name but not loadable.
  ASSERT_NE(f.find("c"), nullptr);
  EXPECT_EQ(f.find("c")->dtype_name, "I8");
  try {
    f.get("c");
    FAIL() << "expected unsupported dtype";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("I8"), std::string::npos) << m;
    EXPECT_NE(m.find("'c'"), std::string::npos) << m;
    EXPECT_NE(m.find(path), std::string::npos) << m;
  }
  // Directory view (single file).
  SafetensorsModel model(dir_.string());
  EXPECT_TRUE(model.contains("a"));
  EXPECT_EQ(std::memcmp(model.get("a").data, a.data(), 24), 0);
  try {
    model.get("missing");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'missing'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos);
  }
}

TEST_F(SafetensorsTest, ShardedIndex) {
  write("s1.safetensors", R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", float_bytes({1.0f}));
  write("s2.safetensors", R"({"y": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}})", std::string("\x00\x3c", 2));
  std::ofstream(dir_ / "model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"x": "s1.safetensors", "y": "s2.safetensors"}})";
  SafetensorsModel m(dir_.string());
  EXPECT_EQ(m.names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(m.get("y").dtype, DType::F16);
  EXPECT_NE(m.get("x").file.find("s1.safetensors"), std::string::npos);
  // An index naming a missing shard fails with the shard's name.
  std::ofstream(dir_ / "model.safetensors.index.json") << R"({"weight_map": {"x": "gone.safetensors"}})";
  try {
    SafetensorsModel bad(dir_.string());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("gone.safetensors"), std::string::npos) << e.what();
  }
}

TEST_F(SafetensorsTest, ErrorsNameFileAndTensor) {
  // Missing file.
  std::string m = error_opening((dir_ / "nope.safetensors").string());
  EXPECT_NE(m.find("nope.safetensors"), std::string::npos) << m;
  // Shorter than the 8-byte length.
  const fs::path tiny = dir_ / "tiny.safetensors";
  std::ofstream(tiny) << "abc";
  m = error_opening(tiny.string());
  EXPECT_NE(m.find("truncated"), std::string::npos) << m;
  // Header length beyond the file.
  m = error_opening(write("long.safetensors", "{}", "", 1000));
  EXPECT_NE(m.find("truncated"), std::string::npos) << m;
  EXPECT_NE(m.find("long.safetensors"), std::string::npos) << m;
  // Bad JSON.
  m = error_opening(write("json.safetensors", "{\"a\": ", ""));
  EXPECT_NE(m.find("bad JSON"), std::string::npos) << m;
  // Data truncated: offsets past the buffer name the tensor.
  m = error_opening(write("cut.safetensors", R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
                          float_bytes({1, 2})));
  EXPECT_NE(m.find("'w'"), std::string::npos) << m;
  EXPECT_NE(m.find("out of range"), std::string::npos) << m;
  EXPECT_NE(m.find("cut.safetensors"), std::string::npos) << m;
  // Offsets inconsistent with dtype x shape.
  m = error_opening(write("size.safetensors", R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
                          float_bytes({1, 2})));
  EXPECT_NE(m.find("'w'"), std::string::npos) << m;
  // Unknown dtype string.
  m = error_opening(write("dt.safetensors", R"({"w": {"dtype": "Q4", "shape": [1], "data_offsets": [0, 1]}})", "x"));
  EXPECT_NE(m.find("Q4"), std::string::npos) << m;
  // No weights in a directory.
  try {
    SafetensorsModel none((dir_ / "empty").string());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors"), std::string::npos);
  }
}

// huggingface/safetensors refuses a header whose tensors, in offset order,
// do not tile the byte buffer exactly (InvalidOffset,
// MetadataIncompleteBuffer): two tensors on the same bytes would load as
// aliases, and bytes no tensor owns are a corrupt or hand-edited file.
TEST_F(SafetensorsTest, TensorsMustTileTheBufferWithoutOverlapGapOrTrailingBytes) {
  const std::string two = float_bytes({1, 2, 3, 4});
  // The two tensors share bytes [4, 8).
  std::string m =
      error_opening(write("overlap.safetensors",
                          R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                          float_bytes({1, 2, 3})));
  EXPECT_NE(m.find("'b'"), std::string::npos) << m;
  EXPECT_NE(m.find("overlap tensor 'a'"), std::string::npos) << m;
  EXPECT_NE(m.find("overlap.safetensors"), std::string::npos) << m;
  // The same bytes under two names.
  m = error_opening(write("alias.safetensors",
                          R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                              "b": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
                          two));
  EXPECT_NE(m.find("overlap"), std::string::npos) << m;
  // Bytes [8, 12) belong to no tensor.
  m = error_opening(write("gap.safetensors",
                          R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}})",
                          two));
  EXPECT_NE(m.find("'b'"), std::string::npos) << m;
  EXPECT_NE(m.find("[8, 12) of the buffer unused"), std::string::npos) << m;
  // Trailing bytes after the last tensor.
  m = error_opening(write("tail.safetensors",
                          R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}})",
                          two));
  EXPECT_NE(m.find("ends at byte 12 of the 16-byte buffer"), std::string::npos) << m;
  // Header order need not be offset order; an empty tensor takes no bytes.
  SafetensorsFile ok(write("ok.safetensors",
                           R"({"b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]},
                               "e": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]},
                               "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                           two));
  EXPECT_EQ(ok.get("b").nbytes, 8u);
  EXPECT_EQ(ok.get("e").nbytes, 0u);
}

TEST_F(SafetensorsTest, ReadsStories260K) {
  SafetensorsModel m(std::string(PAGODA_SHARED_DIR) + "/models/stories260K");
  const SafetensorsTensor& e = m.get("model.embed_tokens.weight");
  EXPECT_EQ(e.shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(e.dtype, DType::F32);
  EXPECT_EQ(m.names().size(), 47u);  // 1 embed + 5 x 9 + final norm (tied lm_head)
}

}  // namespace
}  // namespace pagoda
