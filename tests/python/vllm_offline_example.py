# vLLM's classic offline example (the first seed's script,
# examples/offline_inference/basic.py in vLLM), unchanged but for the import
# line and the model path (the bundled stories260K in place of the seed's
# model). Run from the repository root.
from pagoda import LLM, SamplingParams

prompts = [
    "Hello, my name is",
    "The president of the United States is",
    "The capital of France is",
    "The future of AI is",
]
sampling_params = SamplingParams(temperature=0.8, top_p=0.95)
llm = LLM(model="models/stories260K")
outputs = llm.generate(prompts, sampling_params)
for output in outputs:
    print(output.prompt, output.outputs[0].text)
