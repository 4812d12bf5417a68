// --chat-template FILE: an empty (or whitespace-only) file is a startup
// error naming the file, not a silent "no chat template" that then blames
// tokenizer_config.json on every chat request.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

#include "server/engine_args.h"

namespace pagoda {
namespace {

TEST(ServerChatTemplateFlag, EmptyTemplateFileIsAStartupError) {
  char path[] = "/tmp/pagoda_empty_template_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, " \n\t\n", 4), 4);
  ::close(fd);
  EngineArgs a;
  a.model_dir = std::string(PAGODA_SHARED_DIR) + "/models/tiny-random-qwen2-chat";
  a.chat_template = path;
  try {
    load_model(a, UsageContext::kLlmClass);
    ADD_FAILURE() << "an empty --chat-template file was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "--chat-template: file '" + std::string(path) + "' is empty");
  }
  std::remove(path);
}

}  // namespace
}  // namespace pagoda
